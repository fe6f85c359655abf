// zoo/app/subword.cc -- the C shim over SentencePiece (subword.h). C++ stays in this file:
// every entry point catches what SentencePiece or the standard library may throw and turns
// a status that is not OK into ag_error.
#include "zoo/app/subword.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/ag_base.h"
#include "datasets/text.h"

// Not in the installed headers, exported by libsentencepiece (0.1.9x): the level below which
// its log lines are dropped (2: errors only).
namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int v);
}
} // namespace sentencepiece

struct zoo_spm {
    sentencepiece::SentencePieceProcessor sp;
    std::string bytes;
};

namespace {

const char *const RESERVED[4] = {"<unk>", "<pad>", "<bos>", "<eos>"};

class Sentences : public sentencepiece::SentenceIterator {
  public:
    Sentences(const char *const *s, size_t n) : s_(s), n_(n) { load(); }
    bool done() const override { return i_ >= n_; }
    void Next() override {
        i_++;
        load();
    }
    const std::string &value() const override { return cur_; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

  private:
    void load() {
        if (i_ < n_) cur_.assign(s_[i_]);
    }
    const char *const *s_;
    size_t n_, i_ = 0;
    std::string cur_;
};

int status_error(const char *what, const sentencepiece::util::Status &st) {
    return ag_error("%s: SentencePiece: %s", what, st.ToString().c_str());
}

} // namespace

extern "C" int zoo_spm_train(const char *const *sentences, size_t n, int vocab_size,
                             bool split_digits, uint32_t seed, char **model, size_t *len) {
    *model = nullptr;
    *len = 0;
    if (n == 0) return ag_error("subword training: no sentence to learn from");
    if (vocab_size < ZOO_SPM_MIN_VOCAB)
        return ag_error("subword training: vocabulary size %d, expected at least %d (4 reserved "
                        "ids and 256 byte pieces)",
                        vocab_size, ZOO_SPM_MIN_VOCAB);
    try {
        std::unordered_map<std::string, std::string> args = {
            {"model_type", "unigram"},
            {"vocab_size", std::to_string(vocab_size)},
            {"hard_vocab_limit", "false"},
            {"byte_fallback", "true"},
            {"character_coverage", "1.0"},
            {"normalization_rule_name", "identity"},
            {"num_threads", "1"},
            {"input_sentence_size", "0"},
            {"shuffle_input_sentence", "false"},
            {"unk_id", "0"},
            {"pad_id", "1"},
            {"bos_id", "2"},
            {"eos_id", "3"},
            {"unk_piece", RESERVED[0]},
            {"pad_piece", RESERVED[1]},
            {"bos_piece", RESERVED[2]},
            {"eos_piece", RESERVED[3]},
        };
        if (split_digits) args["split_digits"] = "true"; // unset otherwise: the bytes of before
        sentencepiece::logging::SetMinLogLevel(2);
        sentencepiece::SetRandomGeneratorSeed(seed);
        Sentences it(sentences, n);
        std::string bytes;
        auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &bytes);
        if (!st.ok()) return status_error("subword training", st);
        char *out = static_cast<char *>(malloc(bytes.size() ? bytes.size() : 1));
        if (!out) return ag_error("subword training: out of memory");
        memcpy(out, bytes.data(), bytes.size());
        *model = out;
        *len = bytes.size();
        return 0;
    } catch (const std::exception &e) {
        return ag_error("subword training: %s", e.what());
    }
}

extern "C" zoo_spm *zoo_spm_load(const void *model, size_t len, const char *name) {
    if (!name) name = "subword model";
    zoo_spm *s = nullptr;
    try {
        s = new zoo_spm;
        sentencepiece::logging::SetMinLogLevel(2);
        s->bytes.assign(static_cast<const char *>(model), len);
        auto st = s->sp.LoadFromSerializedProto(s->bytes);
        if (!st.ok()) {
            ag_error("%s: not a SentencePiece model (%zu bytes): %s", name, len,
                     st.ToString().c_str());
            delete s;
            return nullptr;
        }
        for (int i = 0; i < 4; i++) {
            if (s->sp.GetPieceSize() > i && s->sp.IdToPiece(i) == RESERVED[i]) continue;
            ag_error("%s: id %d is not %s: not a model of this program's layout (<unk> <pad> "
                     "<bos> <eos> first)",
                     name, i, RESERVED[i]);
            delete s;
            return nullptr;
        }
        if (s->sp.PieceToId("<0xE2>") == 0) {
            ag_error("%s: the model has no byte pieces (trained without byte_fallback)", name);
            delete s;
            return nullptr;
        }
        return s;
    } catch (const std::exception &e) {
        ag_error("%s: %s", name, e.what());
        delete s;
        return nullptr;
    }
}

extern "C" void zoo_spm_free(zoo_spm *sp) { delete sp; }

extern "C" int zoo_spm_size(const zoo_spm *sp) { return sp->sp.GetPieceSize(); }

extern "C" const void *zoo_spm_model(const zoo_spm *sp, size_t *len) {
    *len = sp->bytes.size();
    return sp->bytes.data();
}

extern "C" int zoo_spm_encode(const zoo_spm *sp, const char *text, int32_t **ids, size_t *n) {
    *ids = nullptr;
    *n = 0;
    try {
        std::vector<int> v;
        auto st = sp->sp.Encode(text, &v);
        if (!st.ok()) return status_error("subword encoding", st);
        if (v.empty()) return 0;
        int32_t *out = static_cast<int32_t *>(malloc(v.size() * sizeof *out));
        if (!out) return ag_error("subword encoding: out of memory");
        for (size_t i = 0; i < v.size(); i++) out[i] = v[i];
        *ids = out;
        *n = v.size();
        return 0;
    } catch (const std::exception &e) {
        return ag_error("subword encoding: %s", e.what());
    }
}

extern "C" int zoo_spm_decode(const zoo_spm *sp, const int32_t *ids, size_t n, char **out) {
    *out = nullptr;
    try {
        std::vector<int> v;
        v.reserve(n);
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= sp->sp.GetPieceSize())
                return ag_error("subword decoding: ids[%zu] = %d, expected 0 to %d", i, (int)ids[i],
                                sp->sp.GetPieceSize() - 1);
            if (ids[i] > 2) v.push_back(ids[i]); /* <unk> <pad> <bos> never shown */
        }
        std::string text;
        auto st = sp->sp.Decode(v, &text);
        if (!st.ok()) return status_error("subword decoding", st);
        char *s = static_cast<char *>(malloc(text.size() + 1));
        if (!s) return ag_error("subword decoding: out of memory");
        memcpy(s, text.c_str(), text.size() + 1);
        *out = s;
        return 0;
    } catch (const std::exception &e) {
        return ag_error("subword decoding: %s", e.what());
    }
}

/* ---- the vocabulary and its codec ---- */

static int codec_encode(void *ctx, const char *text, int32_t **ids, size_t *n) {
    char *norm = nullptr;
    *ids = nullptr;
    *n = 0;
    if (ds_text_normalize(text, &norm)) return -1;
    int rc = zoo_spm_encode(static_cast<const zoo_spm *>(ctx), norm, ids, n);
    free(norm);
    return rc;
}

static int codec_decode(void *ctx, const int32_t *ids, size_t n, char **out) {
    return zoo_spm_decode(static_cast<const zoo_spm *>(ctx), ids, n, out);
}

static void codec_free(void *ctx) { zoo_spm_free(static_cast<zoo_spm *>(ctx)); }

extern "C" int zoo_spm_vocab(const void *model, size_t len, const char *name, ds_vocab **out) {
    *out = nullptr;
    zoo_spm *sp = zoo_spm_load(model, len, name);
    if (!sp) return -1;
    ds_vocab *v = ds_vocab_new();
    int rc = v ? 0 : -1;
    try {
        for (int i = 0; !rc && i < zoo_spm_size(sp); i++) {
            const std::string &p = sp->sp.IdToPiece(i);
            rc = ds_vocab_add(v, p.data(), p.size(), nullptr);
        }
    } catch (const std::exception &e) {
        rc = ag_error("%s: %s", name ? name : "subword model", e.what());
    }
    if (rc) {
        zoo_spm_free(sp);
        ds_vocab_free(v);
        return -1;
    }
    ds_codec c = {};
    c.name = ZOO_SPM_CODEC;
    c.encode = codec_encode;
    c.decode = codec_decode;
    c.free = codec_free;
    c.ctx = sp;
    c.model = zoo_spm_model(sp, &c.model_len);
    if (ds_vocab_set_codec(v, &c)) { /* frees sp */
        ds_vocab_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

extern "C" const zoo_subword_ops *zoo_subword_spm(void) {
    static const zoo_subword_ops ops = {zoo_spm_train, zoo_spm_vocab};
    return &ops;
}
