/* zoo/app/decode_internal.h -- what the decoding files share: decode.c (the eval scope, encoding
 * before the steps, a call's sentences in chunks over the engine's threads), greedy.c, beam.c,
 * translate.c (sentences <-> ids), attention.c (recording and plots), evaluate.c. Not
 * installed. */
#ifndef TG_ZOO_DECODE_INTERNAL_H
#define TG_ZOO_DECODE_INTERNAL_H

#include "decode.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs in eval mode with recording off (zoo__scope_begin resets the tape); zoo__scope_end
 * restores recording, resets the tape and returns rc. */
typedef struct zoo__eval_scope {
    ag_tape *t;
    bool prev;
    nn_ctx c;
} zoo__eval_scope;

zoo__eval_scope zoo__scope_begin(ag_tape *t, nn_packs *packs);
int zoo__scope_end(zoo__eval_scope *s, int rc);
/* zoo__scope_end with -1 and ag_last_error prefixed by "<what> failed: ". */
int zoo__op_failed(zoo__eval_scope *s, const char *what);

/* Encodes (trace or NULL), reserves room for `rows` rows and max_steps steps, and marks the tape
 * where the state ends: each step's intermediates above it are rewound. Returns the model's
 * state (on the tape), or NULL after an error. */
void *zoo__encode_for_steps(zoo_model *m, zoo__eval_scope *sc, const int32_t *src,
                            const int32_t *src_len, int B, int Ts, int rows, int max_steps,
                            const zoo_attn_trace *trace, ag_tape_pos *mark);

/* The sentences one task decodes: src (B, Ts) with its valid lengths src_len (B,), and its
 * results out (B, max_steps) and out_len (B,), all in the chunk's own buffers. */
typedef struct zoo__chunk {
    const int32_t *src, *src_len;
    int B, Ts;
    int32_t *out;
    int *out_len;
} zoo__chunk;

/* Decodes chunk ch on tape t with the call's packed weights; 0 or -1 (ag_last_error). */
typedef int (*zoo__chunk_fn)(zoo_model *m, ag_tape *t, nn_packs *packs, const zoo__chunk *ch,
                             const void *args);

/* fn over the sentences of a call (src (B, Ts), src_len (B,); results into out (B, max_steps),
 * out_len (B,)) in chunks of about 256 / rows_each sentences (rows_each: decoder rows per
 * sentence, the beam), taken whole by the engine's threads (ag_run_tasks), the caller's on t,
 * the others on tapes of their own; the model's Linear weights packed once for the call. The
 * chunks take the sentences by length, longest first; a pad_free model's chunk is cut to its
 * longest source (when none of its sources is empty), so the padding no row attends to is not
 * encoded. A source id outside the vocabulary is refused first, naming the sentence. Returns 0,
 * or -1 with the error of the first chunk that failed. */
int zoo__in_chunks(zoo_model *m, ag_tape *t, const int32_t *src, const int32_t *src_len, int B,
                   int Ts, int max_steps, int32_t *out, int *out_len, int rows_each,
                   zoo__chunk_fn fn, const void *args);

/* What every chunk of a zoo_greedy or zoo_beam_search call shares. */
typedef struct zoo__decode_args {
    int32_t bos, eos;
    int max_steps, beam;
    double alpha;
} zoo__decode_args;

/* Called after the encoder (step -1) and after each decoding step with the trace that received
 * their attention weights. */
typedef void (*zoo__step_hook)(zoo_model *m, int step, const zoo_attn_trace *trace, void *user);

/* zoo_greedy of B sentences at once on tape t, in the calling thread (packs may be NULL), with
 * hook (or NULL) called after the encoder and each step. 0 or -1 (ag_last_error). */
int zoo__greedy(zoo_model *m, ag_tape *t, nn_packs *packs, const int32_t *src,
                const int32_t *src_len, int B, int Ts, int32_t bos, int32_t eos, int max_steps,
                int32_t *out, int *out_len, zoo__step_hook hook, void *user);

/* A sentence as d2l's predict encodes it: ids (num_steps), *len its valid length. 0 or -1. */
int zoo__encode_sentence(const ds_vocab *v, const char *sentence, int num_steps, int32_t *ids,
                         int32_t *len);

#ifdef __cplusplus
}
#endif

#endif
