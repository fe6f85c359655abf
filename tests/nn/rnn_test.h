/* rnn_test.h -- what test_rnn.c and test_rnn_gradcheck.c share: an LSTM or a GRU of the given
 * options in its own store (model_init), and its forward over valid lengths (fwd). */
#ifndef TG_TESTS_NN_RNN_TEST_H
#define TG_TESTS_NN_RNN_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include "nn/nn.h"
#include "tests/tg_test.h"

/* An LSTM or a GRU (lstm) and its own store of parameters. */
typedef struct model {
    bool lstm;
    nn_lstm l;
    nn_gru g;
    nn_params *ps;
} model;

/* m: the kind of lstm, input size in, H hiddens, NL layers, dropout p between layers,
 * batch-first bf, bidirectional bi, its store finalized with seed. */
static inline void model_init(model *m, bool lstm, int in, int H, int NL, double p, bool bf,
                              bool bi, uint64_t seed) {
    nn_rnn_opts o = {.batch_first = bf, .bidirectional = bi};
    m->lstm = lstm;
    m->ps = nn_params_new();
    if (lstm) TG_OK(nn_lstm_init_opts(&m->l, m->ps, "rnn", in, H, NL, p, &o));
    else TG_OK(nn_gru_init_opts(&m->g, m->ps, "rnn", in, H, NL, p, &o));
    TG_OK(nn_params_finalize(m->ps, seed));
}

/* nn_{lstm,gru}_forward_lengths; *cn stays NULL for a GRU. */
static inline ag_tensor *fwd(const model *m, const nn_ctx *c, ag_tensor *x, const int32_t *len,
                             ag_tensor *h0, ag_tensor *c0, ag_tensor **hn, ag_tensor **cn) {
    if (cn) *cn = NULL;
    return m->lstm ? nn_lstm_forward_lengths(&m->l, c, x, len, h0, c0, hn, cn)
                   : nn_gru_forward_lengths(&m->g, c, x, len, h0, hn);
}

#endif
