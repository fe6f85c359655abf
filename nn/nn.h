/* nn.h -- tapegrad's layer library: parameters, layers, checkpoints. Include this one header.
 *
 * A model in six lines (the whole program is nn/examples/tutorial_mlp.c, explained in
 * docs/nn.md):
 *
 *     nn_params *ps = nn_params_new();
 *     nn_linear fc1, fc2;
 *     nn_linear_init(&fc1, ps, "fc1", 2, 32, true);     // registers fc1.weight, fc1.bias
 *     nn_linear_init(&fc2, ps, "fc2", 32, 3, true);
 *     if (nn_params_finalize(ps, 42)) die(ag_last_error());  // one allocation, init from seed
 *     nn_ctx c = { .tape = t, .training = true, .rng = &rng };
 *     ag_tensor *logits = nn_linear_forward(&fc2, &c, nn_relu(&c, nn_linear_forward(&fc1, &c, x)));
 *
 * Pieces (one header each, all included here):
 *   nn/base.h        the forward context nn_ctx; nn_eval_begin / nn_eval_end (eval, no tape)
 *   nn/params.h      the parameter store: named leaves over flat value/gradient buffers, and
 *                    non-trainable buffers
 *   nn/layers.h      Linear, Embedding, LayerNorm (and of a residual sum), Dropout, ReLU
 *   nn/quant.h       int8 and bf16 Linear for inference (int8: per-channel weights, per-row
 *                    activations, int32 sums by AVX512-VNNI or portable; bf16: float sums by
 *                    AVX512-BF16 or its exact emulation), which nn_packs can switch on
 *   nn/gru.h         the GRU cell; multi-layer GRU (PyTorch layout) and its one-step function
 *   nn/lstm.h        the LSTM cell; multi-layer LSTM (PyTorch layout) and its one-step function
 *   nn/rnn.h         the recurrent layers' options (batch-first, bidirectional), per-sequence
 *                    valid lengths and their ops (mask, reverse, last step), the shared driver
 *   nn/batchnorm.h   BatchNorm1d (running statistics kept as buffers of the store)
 *   nn/conv.h        Conv1d, Conv2d (im2col + GEMM; PyTorch layout); nn/pool.h: max/avg pooling
 *   nn/attention.h   attention cores: multi-head scaled dot-product, additive scores
 *   nn/loss.h        an output layer and its cross-entropy in one op, over row chunks;
 *                    d2l's masked sequence loss, which picks that op or the composite
 *   nn/kv_cache.h    decoding state: the key/value cache of incremental decoding, row gathers
 *                    for beam search
 *   nn/io/checkpoint.h  safetensors checkpoints with metadata and a checksum
 *   nn/module.h      modules and Sequential (PyTorch's nn.Module): a tree of the layers above,
 *                    named and registered in one call, train/eval flags, a subtree's parameters
 * The optimizers live in optim/optim.h.
 *
 * Errors. Usage errors inside a forward pass are reported by the autograd ops (ag's error
 * handler, ag_last_error()) and the forward returns NULL; every forward given a NULL input
 * returns NULL, so a whole model is checked once, on its output. The few checks a layer makes
 * itself (e.g. a GRU input that is not 3-D) are reported the same way (ag_report: ag's
 * handler and ag_last_error()).
 * Everything else that can fail (registration, finalize, I/O, checkpoint loading, optimizer
 * configuration) follows one rule, in nn/ and optim/ alike:
 *     a function returning int returns 0 on success and -1 on failure;
 *     a function returning a pointer returns NULL on failure;
 *     either way ag_last_error() then holds one line naming the file, tensor or field and
 *     what was expected.
 * Nothing in nn/ or optim/ prints, exits or aborts.
 *
 * Fused kernels. Where a profile showed it pays, a layer's forward runs one fused op written in
 * nn/ on the public op API (autograd/ag_op.h), in the file of its layer: the attention cores,
 * LayerNorm and AddNorm (nn_layer_norm_forward, nn_layer_norm_add_forward), the GRU and LSTM
 * cells, BatchNorm1d, the output layer with its cross-entropy (nn_linear_ce_forward). Each has
 * beside it the same computation composed of ag primitives (nn_*_composite), the reference it
 * is tested against.
 */
#ifndef TG_NN_H
#define TG_NN_H

#include "base.h"
#include "params.h"
#include "layers.h"
#include "quant.h"
#include "gru.h"
#include "lstm.h"
#include "rnn.h"
#include "batchnorm.h"
#include "conv.h"
#include "pool.h"
#include "attention.h"
#include "loss.h"
#include "kv_cache.h"
#include "module.h"
#include "io/checkpoint.h"

#endif
