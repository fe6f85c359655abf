/* test_ckpt_io.c -- checkpoints' writing and partial reading (float32 product, links nn): the
 * atomic writer of autograd/ag_file.h (symlinks, modes, stale temporaries, abort), buffers
 * (BatchNorm's running statistics), non-strict loads (PyTorch's strict=False), and streamed
 * saves of borrowed tensors (the same bytes as the copying writer, write errors reported). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autograd/ag_file.h"
#include "nn/nn.h"
#include "tests/tg_test.h"
#include "tests/nn/ckpt_test_util.h"

/* ---- The atomic writer (autograd/ag_file.h) ------------------------------------------------ */

/* The whole content of path into buf (NUL-terminated); returns its length or -1. */
static long slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* Writes text to path through ag_file; returns ag_file_commit's status. */
static int write_atomic(const char *path, const char *text) {
    ag_file af;
    FILE *f = ag_file_open(&af, path);
    if (!f) return -1;
    fputs(text, f);
    return ag_file_commit(&af);
}

static void test_file_symlink_mode(void) {
    char sub[128], real[192], link[192], link2[192], dangling[192], buf[64], lt[192];
    snprintf(sub, sizeof sub, "%s/links", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    snprintf(real, sizeof real, "%s/real.txt", sub);
    snprintf(link, sizeof link, "%s/link.txt", sub);
    snprintf(link2, sizeof link2, "%s/link2.txt", sub);
    snprintf(dangling, sizeof dangling, "%s/dangling.txt", sub);
    CU_ASSERT_EQUAL(write_atomic(real, "old"), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(real, 0600), 0);
    CU_ASSERT_EQUAL_FATAL(symlink("real.txt", link), 0); /* relative, as ln -s makes them */
    CU_ASSERT_EQUAL_FATAL(symlink(link, link2), 0);      /* absolute, a chain of two */
    /* Through the chain: the links stay links, the target gets the data, keeps mode 0600. */
    CU_ASSERT_EQUAL(write_atomic(link2, "new"), 0);
    struct stat st;
    CU_ASSERT_EQUAL(lstat(link, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    CU_ASSERT_EQUAL(lstat(link2, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    ssize_t k = readlink(link, lt, sizeof lt - 1);
    CU_ASSERT_EQUAL_FATAL(k, 8);
    lt[k] = '\0';
    CU_ASSERT_STRING_EQUAL(lt, "real.txt");
    CU_ASSERT_EQUAL(slurp(real, buf, sizeof buf), 3);
    CU_ASSERT_STRING_EQUAL(buf, "new");
    CU_ASSERT_EQUAL(stat(real, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
    /* A checkpoint saved through a link: the same. */
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_save(ck, link), 0);
    nn_ckpt_free(ck);
    CU_ASSERT_EQUAL(lstat(link, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    CU_ASSERT_EQUAL(stat(real, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
    CU_ASSERT_EQUAL(nn_ckpt_load(&ck, link), 0);
    nn_ckpt_free(ck);
    /* A dangling link creates its target; a new file gets 0666 & ~umask. */
    CU_ASSERT_EQUAL_FATAL(symlink("created.txt", dangling), 0);
    mode_t old = umask(027);
    CU_ASSERT_EQUAL(write_atomic(dangling, "made"), 0);
    umask(old);
    snprintf(real, sizeof real, "%s/created.txt", sub);
    CU_ASSERT_EQUAL(slurp(real, buf, sizeof buf), 4);
    CU_ASSERT_EQUAL(stat(real, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0640);
    CU_ASSERT_EQUAL(lstat(dangling, &st), 0);
    CU_ASSERT(S_ISLNK(st.st_mode));
    /* 3 links, real.txt, created.txt: no temporary left. */
    CU_ASSERT_EQUAL(count_entries(sub), 5);
    /* A link loop. */
    snprintf(link, sizeof link, "%s/loop.txt", sub);
    CU_ASSERT_EQUAL_FATAL(symlink("loop.txt", link), 0);
    TG_EXPECT_ERROR(write_atomic(link, "x"), "loop.txt: more than 40 levels of symbolic links");
    /* A device is written in place. */
    CU_ASSERT_EQUAL(write_atomic("/dev/null", "discarded"), 0);
}

static void test_file_stale_abort(void) {
    char sub[128], target[192], p[256], buf[64];
    snprintf(sub, sizeof sub, "%s/stale", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0755), 0);
    snprintf(target, sizeof target, "%s/out.bin", sub);
    CU_ASSERT_EQUAL(write_atomic(target, "keep"), 0);
    /* A pid that no longer exists: a child that has exited and been reaped. */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    CU_ASSERT_FATAL(dead > 0);
    waitpid(dead, NULL, 0);
    static const char *const names[] = {".out.bin.tmp.%ld.aB3dE9",   /* stale: removed */
                                        ".out.bin.tmp.1.aB3dE9",     /* pid 1 lives: kept */
                                        ".other.bin.tmp.%ld.aB3dE9", /* another target: kept */
                                        ".out.bin.tmp.%ld.toolong7", /* not our pattern: kept */
                                        "out.bin.tmp.XXXXXX"};       /* not ours: kept */
    for (int i = 0; i < 5; i++) {
        char name[64];
        snprintf(name, sizeof name, names[i], (long)dead);
        snprintf(p, sizeof p, "%s/%s", sub, name);
        FILE *f = fopen(p, "wb");
        fputs("partial", f);
        fclose(f);
    }
    CU_ASSERT_EQUAL(count_entries(sub), 6);
    /* Open: the stale temporary goes, ours appears under the documented name. */
    ag_file af;
    FILE *f = ag_file_open(&af, target);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    snprintf(p, sizeof p, "%s/.out.bin.tmp.%ld.", sub, (long)getpid());
    CU_ASSERT_EQUAL(strncmp(af.tmp, p, strlen(p)), 0);
    CU_ASSERT_EQUAL(strlen(af.tmp), strlen(p) + 6);
    CU_ASSERT_EQUAL(access(af.tmp, F_OK), 0);
    snprintf(p, sizeof p, "%s/.out.bin.tmp.%ld.aB3dE9", sub, (long)dead);
    CU_ASSERT_EQUAL(access(p, F_OK), -1);
    CU_ASSERT_EQUAL(count_entries(sub), 6); /* out.bin, 4 kept, our temporary */
    /* Abort: the target intact, the temporary gone; abort again is a no-op. */
    fputs("half-written", f);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", af.tmp);
    ag_file_abort(&af);
    ag_file_abort(&af);
    CU_ASSERT_PTR_NULL(af.fp);
    CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
    CU_ASSERT_EQUAL(slurp(target, buf, sizeof buf), 4);
    CU_ASSERT_STRING_EQUAL(buf, "keep");
    CU_ASSERT_EQUAL(count_entries(sub), 5);
    /* Commit on a closed ag_file is an error, not a crash. */
    TG_EXPECT_ERROR(ag_file_commit(&af), "not open");
}

/* ---- buffers (BatchNorm's running statistics) -------------------------------------------- */

static nn_params *make_bn(nn_batch_norm1d *bn, nn_linear *fc) {
    nn_params *ps = nn_params_new();
    nn_linear_init(fc, ps, "net.fc", 3, 2, true);
    nn_batch_norm1d_init(bn, ps, "net.bn", 2, 1e-5, 0.1);
    CU_ASSERT_EQUAL(nn_params_finalize(ps, 3), 0);
    return ps;
}

/* A BatchNorm1d store trained three batches: its checkpoint holds the parameters and the
 * buffers in the state_dict's order, num_batches_tracked as I64; a fresh store loads the same
 * running statistics; a file written as PyTorch does (I64 counter) loads. */
static void test_buffers(void) {
    nn_batch_norm1d bn, bn2;
    nn_linear fc, fc2;
    nn_params *ps = make_bn(&bn, &fc);
    ag_tape *t = ag_tape_new();
    nn_ctx c = {.tape = t, .training = true};
    for (int step = 0; step < 3; step++) {
        ag_tensor *x = ag_tensor_new(t, AG_SHAPE(4, 2));
        for (int i = 0; i < 8; i++) x->data[i] = (ag_real)(i * (step + 1) % 5) - 1;
        CU_ASSERT_PTR_NOT_NULL_FATAL(nn_batch_norm1d_forward(&bn, &c, x));
        ag_tape_reset(t);
    }
    CU_ASSERT_EQUAL(bn.num_batches_tracked->data[0], 3);
    CU_ASSERT_NOT_EQUAL(bn.running_mean->data[0], 0);
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_add_params(ck, ps), 0);
    static const char *order[] = {"net.fc.weight",
                                  "net.fc.bias",
                                  "net.bn.weight",
                                  "net.bn.bias",
                                  "net.bn.running_mean",
                                  "net.bn.running_var",
                                  "net.bn.num_batches_tracked"};
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_count(ck), 7);
    for (size_t i = 0; i < 7; i++) CU_ASSERT_STRING_EQUAL(nn_ckpt_at(ck, i)->name, order[i]);
    const nn_ckpt_tensor *nbt = nn_ckpt_find(ck, "net.bn.num_batches_tracked");
    CU_ASSERT_EQUAL(nbt->dtype, NN_I64);
    CU_ASSERT_EQUAL(nbt->ndim, 0);
    int64_t count = 0;
    CU_ASSERT_EQUAL(nn_ckpt_read_i64(ck, "net.bn.num_batches_tracked", 0, NULL, &count), 0);
    CU_ASSERT_EQUAL(count, 3);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path_in("bn.safetensors")), 0);
    nn_ckpt_free(ck);

    nn_params *ps2 = make_bn(&bn2, &fc2);
    CU_ASSERT_EQUAL_FATAL(nn_load_params(ps2, path_in("bn.safetensors")), 0);
    for (size_t i = 0; i < nn_params_tensor_count(ps); i++) {
        const ag_tensor *a = nn_params_tensor_at(ps, i), *b = nn_params_tensor_at(ps2, i);
        CU_ASSERT_EQUAL_FATAL(a->numel, b->numel);
        for (ptrdiff_t k = 0; k < a->numel; k++) CU_ASSERT_EQUAL(a->data[k], b->data[k]);
    }
    CU_ASSERT_EQUAL(bn2.num_batches_tracked->data[0], 3);
    /* the eval forward of both agrees: the same running statistics */
    c.training = false;
    ag_tensor *x = ag_tensor_new(t, AG_SHAPE(2, 2));
    for (int i = 0; i < 4; i++) x->data[i] = (ag_real)i;
    ag_tensor *y1 = nn_batch_norm1d_forward(&bn, &c, x), *y2 = nn_batch_norm1d_forward(&bn2, &c, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y2);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(y1->data[i], y2->data[i]);
    nn_params_free(ps2);

    /* as PyTorch writes a BatchNorm1d(2)'s state_dict: F32 and an I64 counter of 7 */
    static const unsigned char data[] = {
        0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40, /* weight 1, 2 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0xBF, /* bias 0, -1 */
        0x00, 0x00, 0x00, 0x3F, 0x00, 0x00, 0x40, 0x40, /* running_mean 0.5, 3 */
        0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0x80, 0x3E, /* running_var 4, 0.25 */
        0x07, 0,    0,    0,    0,    0,    0,    0,    /* num_batches_tracked 7 */
    };
    const char *hdr =
        "{\"bn.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"bn.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
        "\"bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
        "\"bn.running_var\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
        "\"bn.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[32,40]}}";
    unsigned char buf[1024];
    size_t n = make_file(buf, hdr, data, sizeof data, 0);
    nn_ckpt *pt;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&pt, buf, n, "torch_bn.safetensors", NULL), 0);
    nn_params *ps3 = nn_params_new();
    nn_batch_norm1d bn3;
    nn_batch_norm1d_init(&bn3, ps3, "bn", 2, 1e-5, 0.1);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps3, 1), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_params(pt, ps3, 0), 0);
    CU_ASSERT_EQUAL(bn3.weight->data[1], 2);
    CU_ASSERT_EQUAL(bn3.bias->data[1], -1);
    CU_ASSERT_EQUAL(bn3.running_mean->data[1], 3);
    CU_ASSERT_EQUAL(bn3.running_var->data[1], 0.25f);
    CU_ASSERT_EQUAL(bn3.num_batches_tracked->data[0], 7);
    /* an I64 tensor where the store wants floats is refused */
    TG_EXPECT_ERROR(nn_ckpt_read(pt, "bn.num_batches_tracked", 0, NULL, (ag_real[1]){0}),
                    "dtype I64, expected a float dtype");
    nn_ckpt_free(pt);
    nn_params_free(ps3);
    nn_params_free(ps);
    ag_tape_free(t);
}

/* ---- non-strict loads (PyTorch's strict=False) ------------------------------------------- */

typedef struct encoder {
    nn_embedding emb;
    nn_lstm rnn;
    nn_batch_norm1d bn;
} encoder;

static void encoder_init(encoder *e, nn_params *ps) {
    nn_embedding_init(&e->emb, ps, "encoder.embedding", 10, 4);
    nn_lstm_init(&e->rnn, ps, "encoder.rnn", 4, 3, 1, 0);
    nn_batch_norm1d_init(&e->bn, ps, "encoder.bn", 3, 1e-5, 0.1);
}

/* A pretrained encoder's checkpoint into a new model's store (encoder + decoder): the
 * encoder's tensors loaded, the decoder's reported missing, the checkpoint's extra tensor
 * unexpected; a shape mismatch names both shapes; a checkpoint matching nothing is an error. */
static void test_partial_load(void) {
    nn_params *pre = nn_params_new();
    encoder e;
    encoder_init(&e, pre);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(pre, 7), 0);
    e.bn.num_batches_tracked->data[0] = 5;
    e.bn.running_var->data[2] = 9;
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_add_params(ck, pre), 0);
    CU_ASSERT_EQUAL_FATAL(
        nn_ckpt_add(ck, "head.weight", 1, (const int[]){2}, (const ag_real[]){1, 2}), 0);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_add(ck, "optim.step", 0, NULL, (const ag_real[]){3}), 0);

    nn_params *ps = nn_params_new();
    encoder e2;
    nn_linear dec;
    encoder_init(&e2, ps);
    nn_linear_init(&dec, ps, "decoder.dense", 3, 10, true);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(ps, 8), 0);
    ag_real dec_before = dec.weight->data[0];
    /* strict: refused, pointing at the non-strict load */
    TG_EXPECT_ERROR(nn_ckpt_load_params(ck, ps, 0), "decoder.dense.weight' is missing");
    nn_ckpt_load_report r;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_params_partial(ck, ps, &r), 0);
    CU_ASSERT_EQUAL(r.loaded, 1 + 4 + 5);
    CU_ASSERT_EQUAL_FATAL(r.n_missing, 2);
    CU_ASSERT_STRING_EQUAL(r.missing[0], "decoder.dense.weight");
    CU_ASSERT_STRING_EQUAL(r.missing[1], "decoder.dense.bias");
    CU_ASSERT_EQUAL_FATAL(r.n_unexpected, 1);
    CU_ASSERT_STRING_EQUAL(r.unexpected[0], "head.weight");
    nn_ckpt_load_report_free(&r);
    for (size_t i = 0; i < nn_params_tensor_count(pre); i++) {
        const ag_tensor *a = nn_params_tensor_at(pre, i), *b = nn_params_find(ps, a->name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        for (ptrdiff_t k = 0; k < a->numel; k++) CU_ASSERT_EQUAL(a->data[k], b->data[k]);
    }
    CU_ASSERT_EQUAL(e2.bn.num_batches_tracked->data[0], 5);
    CU_ASSERT_EQUAL(dec.weight->data[0], dec_before);              /* untouched */
    CU_ASSERT_EQUAL(nn_ckpt_load_params_partial(ck, ps, NULL), 0); /* no report wanted */

    /* a shape mismatch: an error naming both shapes, the store untouched */
    nn_params *wide = nn_params_new();
    nn_embedding emb;
    nn_embedding_init(&emb, wide, "encoder.embedding", 10, 5);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(wide, 1), 0);
    ag_real w0 = emb.weight->data[0];
    TG_EXPECT_ERROR(nn_ckpt_load_params_partial(ck, wide, &r),
                    "tensor 'encoder.embedding.weight' has shape [10, 4], expected [10, 5]");
    CU_ASSERT_EQUAL(emb.weight->data[0], w0);
    CU_ASSERT_EQUAL(r.n_missing + r.n_unexpected + r.loaded, 0);
    nn_params_free(wide);

    /* nothing matches: an error */
    nn_params *other = nn_params_new();
    nn_linear fc;
    nn_linear_init(&fc, other, "net.fc", 3, 2, true);
    CU_ASSERT_EQUAL_FATAL(nn_params_finalize(other, 1), 0);
    TG_EXPECT_ERROR(nn_ckpt_load_params_partial(ck, other, &r),
                    "a non-strict load matched nothing");
    nn_params_free(other);
    nn_ckpt_free(ck);
    nn_params_free(ps);
    nn_params_free(pre);
}

/* ---- Streamed saves: borrowed tensors --------------------------------------------------- */

/* The checkpoint of the streamed tests: tensors of the store dtype, an int64 tensor between
 * them, an empty one and a scalar, borrowed or copied as ck is set. vals gets the 21 values
 * of the float tensors (kept alive by the caller while ck borrows them). */
static void streamed_content(nn_ckpt *ck, ag_real *vals) {
    for (int i = 0; i < 21; i++) vals[i] = (ag_real)((i - 7) * 0.375);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "w", 2, (const int[]){3, 5}, vals), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add_i64(ck, "count", 1, (const int[]){2}, (const int64_t[]){7, -3}), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "b", 1, (const int[]){5}, vals + 15), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "empty", 2, (const int[]){0, 2}, NULL), 0);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "s", 0, NULL, vals + 20), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "k", "v"), 0);
}

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Copied or borrowed, saved to a file or to memory: the same bytes as the files written before
 * saves were streamed (length and FNV-1a of streamed_content's image as the build of commit
 * b2cfeb6 wrote it, F32 and F64). */
static void test_streamed_bytes(void) {
    static const size_t want_len[2] = {484, 576};
    static const uint64_t want_fnv[2] = {0xf8e4ef8e71d0af1cull, 0xe729ae4598a55043ull};
    for (int f64 = 0; f64 < 2; f64++)
        for (int borrow = 0; borrow < 2; borrow++) {
            nn_ckpt *ck = nn_ckpt_new();
            CU_ASSERT_PTR_NOT_NULL_FATAL(ck);
            if (f64) CU_ASSERT_EQUAL(nn_ckpt_set_store_dtype(ck, NN_F64), 0);
            CU_ASSERT_EQUAL(nn_ckpt_set_borrow(ck, borrow), 0);
            ag_real vals[21];
            streamed_content(ck, vals);
            unsigned char *img;
            size_t n;
            CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(ck, &img, &n), 0);
            CU_ASSERT_EQUAL(n, want_len[f64]);
            CU_ASSERT_EQUAL(fnv1a(img, n), want_fnv[f64]);
            CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path_in("streamed.safetensors")), 0);
            static unsigned char file[1024];
            FILE *f = fopen(path_in("streamed.safetensors"), "rb");
            CU_ASSERT_PTR_NOT_NULL_FATAL(f);
            size_t got = fread(file, 1, sizeof file, f);
            fclose(f);
            CU_ASSERT_EQUAL(got, n);
            CU_ASSERT_EQUAL(memcmp(file, img, n), 0);
            /* read back from the checkpoint in memory, borrowed or not */
            ag_real w[15];
            int64_t c[2];
            CU_ASSERT_EQUAL(nn_ckpt_read(ck, "w", 2, (const int[]){3, 5}, w), 0);
            CU_ASSERT_EQUAL(memcmp(w, vals, sizeof w), 0);
            CU_ASSERT_EQUAL(nn_ckpt_read_i64(ck, "count", 1, (const int[]){2}, c), 0);
            CU_ASSERT_TRUE(c[0] == 7 && c[1] == -3);
            /* the wrong dtype, shape or name each way, named in the message */
            CU_ASSERT_EQUAL(nn_ckpt_read_i64(ck, "w", 2, (const int[]){3, 5}, c), -1);
            CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "tensor 'w' has dtype F"));
            CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "expected I64"));
            CU_ASSERT_EQUAL(nn_ckpt_read(ck, "count", 1, (const int[]){2}, w), -1);
            CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "has dtype I64, expected a float"));
            CU_ASSERT_EQUAL(nn_ckpt_read_i64(ck, "count", 1, (const int[]){3}, c), -1);
            CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "has shape [2], expected [3]"));
            CU_ASSERT_EQUAL(nn_ckpt_read_i64(ck, "counts", 1, (const int[]){2}, c), -1);
            CU_ASSERT_PTR_NOT_NULL(strstr(ag_last_error(), "'counts' is missing"));
            free(img);
            nn_ckpt_free(ck);
        }
}

/* A borrowed tensor is taken as it is when saved; the file loads, checksum verified. */
static void test_borrowed_taken_at_save(void) {
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_borrow(NULL, true), -1);
    CU_ASSERT_EQUAL(nn_ckpt_set_borrow(ck, true), 0);
    enum { BIG = 100000 }; /* 400 KB: many chunks of the 16 KiB buffer */
    ag_real *v = malloc(BIG * sizeof *v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    for (int i = 0; i < BIG; i++) v[i] = (ag_real)i;
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "v", 1, (const int[]){BIG}, v), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_meta(ck, "tapegrad.model", "test"), 0);
    v[BIG - 1] = -1; /* after the add, before the save: saved */
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save(ck, path_in("borrowed.safetensors")), 0);
    nn_ckpt_free(ck);
    nn_ckpt *in;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load(&in, path_in("borrowed.safetensors")), 0);
    CU_ASSERT_EQUAL(nn_ckpt_checked(in), NN_CKPT_CHECKED_FILE);
    ag_real *back = malloc(BIG * sizeof *back);
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    CU_ASSERT_EQUAL(nn_ckpt_read(in, "v", 1, (const int[]){BIG}, back), 0);
    CU_ASSERT_EQUAL(memcmp(back, v, BIG * sizeof *v), 0);
    CU_ASSERT_EQUAL(back[BIG - 1], -1);
    nn_ckpt_free(in);
    free(back);
    free(v);
}

/* A loaded file whose data section is not in the order of its header, plus a borrowed tensor:
 * the save writes each tensor at its range. */
static void test_streamed_data_order(void) {
    static const float data[4] = {3, 4, 1, 2}; /* b's values, then a's */
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    unsigned char buf[512];
    size_t n = make_file(buf, hdr, data, sizeof data, 0);
    nn_ckpt *ck;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&ck, buf, n, "order.safetensors", NULL), 0);
    CU_ASSERT_EQUAL(nn_ckpt_set_borrow(ck, true), 0);
    const ag_real c[3] = {5, 6, 7};
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "c", 1, (const int[]){3}, c), 0);
    unsigned char *img;
    size_t m;
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_save_mem(ck, &img, &m), 0);
    nn_ckpt_free(ck);
    CU_ASSERT_EQUAL_FATAL(nn_ckpt_load_mem(&ck, img, m, "resaved", NULL), 0);
    ag_real v[3];
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "a", 1, (const int[]){2}, v), 0);
    CU_ASSERT_TRUE(v[0] == 1 && v[1] == 2);
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "b", 1, (const int[]){2}, v), 0);
    CU_ASSERT_TRUE(v[0] == 3 && v[1] == 4);
    CU_ASSERT_EQUAL(nn_ckpt_read(ck, "c", 1, (const int[]){3}, v), 0);
    CU_ASSERT_TRUE(v[0] == 5 && v[1] == 6 && v[2] == 7);
    CU_ASSERT_EQUAL(nn_ckpt_find(ck, "c")->begin, 16);
    nn_ckpt_free(ck);
    free(img);
}

/* A write that fails while the tensors stream (a full device) is reported with its cause. */
static void test_streamed_write_error(void) {
    if (access("/dev/full", W_OK) != 0) return; /* no such device here */
    nn_ckpt *ck = nn_ckpt_new();
    CU_ASSERT_EQUAL(nn_ckpt_set_borrow(ck, true), 0);
    enum { BIG = 1 << 20 }; /* 4 MB: more than the stream's buffer */
    ag_real *v = calloc(BIG, sizeof *v);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(nn_ckpt_add(ck, "v", 1, (const int[]){BIG}, v), 0);
    TG_EXPECT_ERROR(nn_ckpt_save(ck, "/dev/full"),
                    "/dev/full: writing the temporary file failed: No space left on device");
    nn_ckpt_free(ck);
    free(v);
    model m; /* the shortcut, which borrows the store's buffers, fails the same way */
    nn_params *ps = make_model(&m, 1);
    TG_EXPECT_ERROR(nn_save_params(ps, "/dev/full"), "No space left on device");
    nn_params_free(ps);
}

static CU_TestInfo tests[] = {
    {"ag_file: symlinks, modes, devices", test_file_symlink_mode},
    {"ag_file: stale temporaries, abort", test_file_stale_abort},
    {"buffers: BatchNorm's running statistics, I64 counter", test_buffers},
    {"non-strict load: a pretrained encoder into a new model", test_partial_load},
    {"streamed saves: the bytes of the copying writer, borrowed or not", test_streamed_bytes},
    {"a borrowed tensor is saved as it is at the save", test_borrowed_taken_at_save},
    {"a loaded file's data out of header order, plus a borrowed tensor", test_streamed_data_order},
    {"a write failing mid-stream is reported", test_streamed_write_error},
    CU_TEST_INFO_NULL,
};

/* The suite's files go to one temporary directory, removed at the end. */
int main(void) {
    dir = tg_temp_dir();
    int rc = tg_test_main("nn_checkpoint_io", tests);
    if (tg_remove(dir)) perror("test_ckpt_io: removing its temporary directory");
    return rc;
}
