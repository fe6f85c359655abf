/* ckpt_params.c -- parameter stores to and from checkpoints; typed metadata helpers. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/io/ckpt_internal.h"

int nn_ckpt_add_params(nn_ckpt *ck, const nn_params *ps)
{
    if (!ck || !ps) return ag_error("nn_ckpt_add_params: NULL argument");
    if (!nn_params_finalized(ps))
        return ag_error("nn_ckpt_add_params: the parameter store is not finalized");
    for (size_t i = 0; i < nn_params_count(ps); i++) {
        const ag_tensor *p = nn_params_at(ps, i);
        if (nn_ckpt_add(ck, p->name, p->ndim, p->shape, p->data)) return -1;
    }
    return 0;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int nn_ckpt_load_params(const nn_ckpt *ck, nn_params *ps, unsigned flags)
{
    if (!ck || !ps) return ag_error("nn_ckpt_load_params: NULL argument");
    if (!nn_params_finalized(ps))
        return ag_error("nn_ckpt_load_params: the parameter store is not finalized");
    if (flags & ~NN_CKPT_ALLOW_EXTRA)
        return ag_error("nn_ckpt_load_params: unknown flags 0x%x", flags);
    /* Every check first, so that a failure leaves the store untouched. */
    for (size_t i = 0; i < nn_params_count(ps); i++) {
        const ag_tensor *p = nn_params_at(ps, i);
        if (ck_check(ck, p->name, p->ndim, p->shape)) return -1;
    }
    if (!(flags & NN_CKPT_ALLOW_EXTRA)) {
        for (size_t i = 0; i < nn_ckpt_count(ck); i++) {
            const char *name = nn_ckpt_at(ck, i)->name;
            if (!has_prefix(name, NN_CKPT_OPTIM_PREFIX) && !nn_params_find(ps, name))
                return ag_error("%s: unexpected tensor '%s': not a parameter of the model "
                                    "(%zu parameters expected; pass NN_CKPT_ALLOW_EXTRA to "
                                    "load a part of a larger model)", nn_ckpt_source(ck), name,
                                    nn_params_count(ps));
        }
    }
    for (size_t i = 0; i < nn_params_count(ps); i++) {
        ag_tensor *p = nn_params_at(ps, i);
        ck_decode(ck, nn_ckpt_find(ck, p->name), p->data);
    }
    return 0;
}

int nn_save_params(const nn_params *ps, const char *path)
{
    nn_ckpt *ck = nn_ckpt_new();
    if (!ck) return -1;
    int rc = nn_ckpt_add_params(ck, ps);
    if (!rc) rc = nn_ckpt_save(ck, path);
    nn_ckpt_free(ck);
    return rc;
}

int nn_load_params(nn_params *ps, const char *path)
{
    nn_ckpt *ck;
    if (nn_ckpt_load(&ck, path)) return -1;
    int rc = nn_ckpt_load_params(ck, ps, 0);
    nn_ckpt_free(ck);
    return rc;
}

/* ---- Typed metadata ---------------------------------------------------------------------- */

int nn_ckpt_set_meta_int(nn_ckpt *ck, const char *key, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return nn_ckpt_set_meta(ck, key, buf);
}

int nn_ckpt_meta_int(const nn_ckpt *ck, const char *key, int64_t *v)
{
    const char *s = nn_ckpt_meta(ck, key);
    if (!s)
        return ag_error("%s: metadata key '%s' is missing (expected an integer)",
                            nn_ckpt_source(ck), key ? key : "(null)");
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!s[0] || *end || errno)
        return ag_error("%s: metadata '%s' = \"%.60s\", expected a decimal integer",
                            nn_ckpt_source(ck), key, s);
    *v = x;
    return 0;
}

/* An ag_rng as 64 hex digits: s[0] .. s[3], 16 digits each. */
int nn_ckpt_set_meta_rng(nn_ckpt *ck, const char *key, const ag_rng *r)
{
    char buf[72];
    if (!r) return ag_error("nn_ckpt_set_meta_rng: rng is NULL");
    snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, r->s[0],
             r->s[1], r->s[2], r->s[3]);
    return nn_ckpt_set_meta(ck, key, buf);
}

int nn_ckpt_meta_rng(const nn_ckpt *ck, const char *key, ag_rng *r)
{
    const char *s = nn_ckpt_meta(ck, key);
    if (!s)
        return ag_error("%s: metadata key '%s' is missing (expected an rng state)",
                            nn_ckpt_source(ck), key ? key : "(null)");
    ag_rng x;
    bool ok = strlen(s) == 64;
    for (int k = 0; ok && k < 4; k++) {
        x.s[k] = 0;
        for (int j = 0; ok && j < 16; j++) {
            char c = s[16 * k + j];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            ok = d >= 0;
            x.s[k] = (x.s[k] << 4) | (uint64_t)(ok ? d : 0);
        }
    }
    if (!ok || !r)
        return ag_error("%s: metadata '%s' = \"%.70s\", expected 64 lowercase hex digits "
                            "(an rng state)", nn_ckpt_source(ck), key, s);
    *r = x;
    return 0;
}
