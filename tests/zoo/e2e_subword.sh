#!/usr/bin/env bash
# End-to-end run of the subword pipeline (docs/datasets.md, "Subword vocabularies"):
#   e2e_subword.sh PROGRAM FRA_TXT
# a tiny train --vocab subword (joint and per language), the model inside the checkpoint, the
# same seed giving the same model bytes, translate of typed text (cased, detokenized, never
# <unk>), eval (which score is which), export of the SentencePiece models and SentencePiece's
# own spm_encode / spm_decode agreeing with our encoding, --resume, digits split
# (--split-digits), number tags (--number-tags), an old-style word run beside it, and the bad
# flags. Needs spm_encode, spm_decode and spm_export_vocab (Debian:
# sentencepiece, in the README's commands): a missing tool fails the test.
set -u
# shellcheck source=SCRIPTDIR/e2e_lib.sh
source "$(dirname "$0")/e2e_lib.sh"
e2e_init "$@"

for tool in spm_encode spm_decode spm_export_vocab base64; do
    check "$tool is installed" command -v "$tool" >/dev/null
done

ck="$dir/sw.safetensors"
common=(--data "$data" --num-examples 2000 --num-steps 16 --log-every 0 --shards 1)

check "train --vocab subword" run 0 train "${common[@]}" --vocab subword --vocab-size 600 --epochs 2 --checkpoint "$ck"
grep -E '=>|^loss' "$dir/out" | sed -E 's/, [0-9.]+ tokens.sec//' >"$dir/run1"
check "  says what it learned" has err '^subword: a joint model of [0-9]+ pieces learned from [0-9]+ training sentences'
check "  cased translations of the four sentences" test "$(grep -Ec "^(Go\.|I lost\.|He's calm\.|I'm home\.) => .*, bleu [01]\.[0-9]{3}$" "$dir/out")" = 4
check "  the model is in the checkpoint" test "$(st_meta "$ck" data.preprocess)" = normalize
check "  joint: one model for both sides" test "$(st_meta "$ck" vocab.src_model)" = "$(st_meta "$ck" vocab.tgt_model)"

# the same seed: the same model bytes and the same run
check "same seed: train again" run 0 train "${common[@]}" --vocab subword --vocab-size 600 --epochs 2 --checkpoint "$dir/sw2.safetensors"
check "  same model bytes" test "$(st_meta "$ck" vocab.src_model)" = "$(st_meta "$dir/sw2.safetensors" vocab.src_model)"
grep -E '=>|^loss' "$dir/out" | sed -E 's/, [0-9.]+ tokens.sec//' >"$dir/run2"

check "  same losses and translations" same "$dir/run1" "$dir/run2"

# translate: typed text in, French text out (spm_decode's), whatever the characters
check "translate" run 0 translate --checkpoint "$ck" "I'm home." $'  I\xe2\x80\x99m\xc2\xa0 home. ' "Zürich ✓ 日本 😀"
check "  one line each" test "$(wc -l <"$dir/out")" = 3
check "  typed quotes and blanks normalized" test "$(sed -n 1p "$dir/out")" = "$(sed -n 2p "$dir/out")"
check "  no <unk>, no byte pieces, no ▁" lacks out '<unk>|<0x|▁'
check "  greedy too" run 0 translate --checkpoint "$ck" --beam 1 "I'm home."

# export the models: SentencePiece's own tools read them and agree with our encoding
check "export --src-spm --tgt-spm" run 0 export --checkpoint "$ck" --out "$dir/plain.safetensors" --src-vocab "$dir/src.txt" --tgt-vocab "$dir/tgt.txt" --src-spm "$dir/src.model" --tgt-spm "$dir/tgt.model"
check "  says where" has out '^SentencePiece models \(for spm_encode / spm_decode\): '
check "  joint: one model twice" same "$dir/src.model" "$dir/tgt.model"
check "  the vocabulary is the model's pieces" bash -c "spm_export_vocab --model '$dir/src.model' 2>/dev/null | cut -f1 | cmp -s - '$dir/src.txt'"
st_meta "$ck" vocab.src_model | base64 -d >"$dir/stored.model"
check "  the exported model is the stored one" same "$dir/stored.model" "$dir/src.model"
printf '%s\n' "I'm home." "Où est la gare ?" "Zürich ✓ 日本 😀" "Il a dit « non »." >"$dir/text.txt"
check "  spm_encode | spm_decode is the identity" bash -c "spm_encode --model '$dir/src.model' <'$dir/text.txt' | spm_decode --model '$dir/src.model' | cmp -s - '$dir/text.txt'"
check "  byte fallback: spm_encode gives no <unk> (id 0)" bash -c "spm_encode --model '$dir/src.model' --output_format=id <'$dir/text.txt' | tr ' ' '\n' | grep -qx 0; [ \$? = 1 ]"
# our ids of a sentence are the model's: a checkpoint whose vocabulary entries are spm's pieces
# in id order (checked above) and the trainer's four translations prove the encode path; here the
# decoder side: the French of spm_decode on spm_encode's ids
check "  spm_decode of ids" bash -c "spm_encode --model '$dir/tgt.model' --output_format=id <'$dir/text.txt' | spm_decode --model '$dir/tgt.model' --input_format=id | cmp -s - '$dir/text.txt'"

# our decoding is spm_decode's: the pieces the model wrote (--raw-output) through spm_decode give
# the text translate prints
printf '%s\n' "I'm home." "Where is the station?" "He's calm." >"$dir/en.txt"
"$prog" translate --checkpoint "$ck" <"$dir/en.txt" >"$dir/text_out" 2>/dev/null
"$prog" translate --checkpoint "$ck" --raw-output <"$dir/en.txt" >"$dir/pieces_out" 2>/dev/null
check "  --raw-output: pieces" bash -c "grep -q '▁' '$dir/pieces_out'"
check "  spm_decode of our pieces = our text" bash -c "spm_decode --model '$dir/tgt.model' --input_format=piece <'$dir/pieces_out' | cmp -s - '$dir/text_out'"

# eval: both scores, each named
check "eval" run 0 eval --checkpoint "$ck" --data "$data" --num-examples 2000 --test-frac 0.05
check "  the book's score" has out '^corpus BLEU-4 [0-9]+\.[0-9]{2}, chrF [0-9]+\.[0-9]{2}, mean d2l BLEU [01]\.[0-9]{3} on 100 test sentences \(lowercased, tokenized as d2l: the book.s score\)$'
check "  the standard score" has out '^sacreBLEU [0-9]+\.[0-9]{2} \(nrefs:1\|case:mixed\|eff:no\|tok:13a\|smooth:exp\|version:2\.6\.0\), chrF .* \(cased subword model: the standard score\)$'
check "  beam search by default" has out '^decoding: beam search, --beam 4 --alpha 1$'
check "eval --beam 1" run 0 eval --checkpoint "$ck" --data "$data" --num-examples 2000 --test-frac 0.05 --beam 1
check "  greedy" has out '^decoding: greedy \(--beam 1\)$'

# resume: the checkpoint's models, not learned again
check "resume" run 0 train "${common[@]}" --epochs 3 --checkpoint "$ck" --resume
check "  no new model" lacks err '^subword: '
check "resume: vocabulary flags refused" run 2 train "${common[@]}" --epochs 4 --checkpoint "$ck" --resume --vocab-size 700
check "  message" has err -- '--vocab-size 700 differs from the checkpoint.s [0-9]+ pieces: it cannot change on --resume'
check "resume: the checkpoint's own values may be given" run 0 train "${common[@]}" --epochs 4 --checkpoint "$ck" --resume --vocab subword --vocab-share joint
check "resume: --vocab word refused" run 2 train "${common[@]}" --epochs 5 --checkpoint "$ck" --resume --vocab word
check "  message" has err -- '--vocab word differs from the checkpoint.s subword: it cannot change on --resume'

# validation of a subword run: the standard score chooses (--valid-metric auto), recorded as
# eval computes it; the checkpoint keeps the metric for --resume
sv=(--data "$data" --num-examples 2000 --num-steps 16 --log-every 0 --shards 1 --valid-frac 0.05 --valid-steps 20 --checkpoint "$dir/sv.safetensors")
check "train --vocab subword --valid-steps" run 0 train "${sv[@]}" --vocab subword --vocab-size 600 --epochs 2 --plots "$dir/svp"
check "  the valid line: both scores, the best by sacreBLEU" has err '^valid at step 20 \(epoch [0-9.]+\): loss [0-9.]+, BLEU-4 [0-9.]+, sacreBLEU [0-9.]+, chrF [0-9.]+ \(best sacreBLEU [0-9.]+, saved\)'
last=$(grep '^valid at step' "$dir/err" | tail -1 | sed -E 's/.*sacreBLEU ([0-9.]+), chrF.*/\1/')
check "  the summary: best by sacreBLEU" has out '^valid: BLEU-4 [0-9.]+, sacreBLEU [0-9.]+, loss [0-9.]+ at step [0-9]+; best sacreBLEU'
check "  the checkpoint names the metric" test "$(st_meta "$dir/sv.safetensors" train.valid_metric)" = sacrebleu
check "  valid.csv's columns" test "$(head -1 "$dir/svp/valid.csv")" = "step,epoch,seconds,train_loss,valid_loss,bleu,sacrebleu,chrf"
check "  the standard curves" test -s "$dir/svp/valid_sacrebleu.svg" -a -s "$dir/svp/valid_sacrebleu_time.svg"
best_step=$(awk -F, 'NR > 1 && (NR == 2 || $7 > m) { m = $7; s = $1 } END { print s }' "$dir/svp/valid.csv")
check "  the best checkpoint is the best sacreBLEU's step" test "$(st_meta "$dir/sv.best.safetensors" train.steps)" = "$best_step"
check "eval --split valid --beam 1 of the checkpoint" run 0 eval --checkpoint "$dir/sv.safetensors" --data "$data" --split valid --beam 1
check "  its sacreBLEU is the last validation's ($last)" has out "^sacreBLEU $last \("
check "resume: another --valid-metric refused" run 2 train "${sv[@]}" --epochs 3 --resume --valid-metric bleu4
check "  message" has err -- "--valid-metric bleu4 differs from the checkpoint's sacrebleu"
h1=$(st_meta "$dir/sv.safetensors" train.valid_history)
check "resume: auto keeps the checkpoint's" run 0 train "${sv[@]}" --epochs 3 --resume --valid-metric auto
check "  still sacreBLEU" test "$(st_meta "$dir/sv.safetensors" train.valid_metric)" = sacrebleu
h2=$(st_meta "$dir/sv.safetensors" train.valid_history)
check "  the history kept, new validations after it" bash -c '[[ "$2" == "$1"?* ]]' _ "$h1" "$h2"

# average: the result keeps the subword models and translates as its input (the mean of two
# copies of one checkpoint is that checkpoint's parameters)
cp "$ck" "$dir/copy.safetensors"
check "average of subword checkpoints" run 0 average --out "$dir/avg.safetensors" "$ck" "$dir/copy.safetensors"
check "  keeps the models" test "$(st_meta "$dir/avg.safetensors" vocab.tgt_model)" = "$(st_meta "$ck" vocab.tgt_model)"
"$prog" translate --checkpoint "$ck" <"$dir/en.txt" >"$dir/by_ck" 2>/dev/null
check "  translates as its input" run 0 translate --checkpoint "$dir/avg.safetensors" <"$dir/en.txt"
check "  the same text" same "$dir/out" "$dir/by_ck"
check "average: another subword model refused" run 0 train "${common[@]}" --vocab subword --vocab-size 500 --epochs 1 --checkpoint "$dir/other.safetensors"
check "  refused" run 1 average --out "$dir/avg2.safetensors" "$ck" "$dir/other.safetensors"

# digits split: every digit a piece, in the model SentencePiece's tools read too; fixed on --resume
dg="$dir/digits.safetensors"
check "train --split-digits 1" run 0 train "${common[@]}" --vocab subword --vocab-size 600 --split-digits 1 --epochs 1 --checkpoint "$dg"
st_meta "$dg" vocab.src_model | base64 -d >"$dir/digits.model"
# (a digit the small corpus lacks is its byte piece, <0x34> for 4)
check "  spm_encode splits a number into its digits" bash -c "echo 'In 1990, 42.' | spm_encode --model '$dir/digits.model' | grep -qE '▁ (1|<0x31>) (9|<0x39>) (9|<0x39>) (0|<0x30>) , ▁ (4|<0x34>) (2|<0x32>) \\.\$'"
check "  no piece holds two digits" bash -c "spm_export_vocab --model '$dir/digits.model' 2>/dev/null | cut -f1 | grep -v '^<0x' | grep -qE '[0-9][0-9]'; [ \$? = 1 ]"
check "  another model than without" test "$(st_meta "$dg" vocab.src_model)" != "$(st_meta "$ck" vocab.src_model)"
check "  translate" run 0 translate --checkpoint "$dg" "I was born in 1990."
check "resume: --split-digits 1 again" run 0 train "${common[@]}" --epochs 2 --checkpoint "$dg" --resume --split-digits 1
check "resume: --split-digits 0 refused" run 2 train "${common[@]}" --epochs 3 --checkpoint "$dg" --resume --split-digits 0
check "  message" has err -- "--split-digits 0 differs from the checkpoint.s model \(digits split\): it cannot change on --resume"
check "resume without split: --split-digits 1 refused" run 2 train "${common[@]}" --epochs 5 --checkpoint "$ck" --resume --split-digits 1
check "  message" has err -- "--split-digits 1 differs from the checkpoint.s model \(digits not split\)"

# number tags: recorded in the checkpoint, fixed on --resume, never printed (restored or dropped)
nt="$dir/tags.safetensors"
check "train --number-tags 1" run 0 train "${common[@]}" --vocab subword --vocab-size 600 --number-tags 1 --epochs 1 --checkpoint "$nt"
check "  recorded in the checkpoint" test "$(st_meta "$nt" vocab.number_tags)" = 1
check "  not in an untagged one" test -z "$(st_meta "$ck" vocab.number_tags)"
check "  translate" run 0 translate --checkpoint "$nt" "I was born in 1990." "Room 12 has 3 beds, room 12."
check "  no tag printed" lacks out $'\xee\x80'
grep -E '^[^	]*[0-9]' "$data" | head -200 >"$dir/numbers.txt" # pairs whose English has a number
check "  eval on pairs with numbers" run 0 eval --checkpoint "$nt" --data "$dir/numbers.txt" --num-examples 0 --test-frac 0.5 --out "$dir/tags.tsv"
check "  no tag in its translations" lacks tags.tsv $'\xee\x80'
check "resume: --number-tags 0 refused" run 2 train "${common[@]}" --epochs 2 --checkpoint "$nt" --resume --number-tags 0
check "  message" has err -- "--number-tags 0 differs from the checkpoint.s 1: it cannot change on --resume"
check "resume without tags: --number-tags 1 refused" run 2 train "${common[@]}" --epochs 5 --checkpoint "$ck" --resume --number-tags 1
check "  message" has err -- "--number-tags 1 differs from the checkpoint.s 0"
cp "$nt" "$dir/tags2.safetensors"
check "average keeps the tags" run 0 average --out "$dir/tags_avg.safetensors" "$nt" "$dir/tags2.safetensors"
check "  recorded" test "$(st_meta "$dir/tags_avg.safetensors" vocab.number_tags)" = 1
# (50 pairs without a digit: the same subword model with and without tags)
few=(--data "$data" --num-examples 50 --num-steps 16 --log-every 0 --shards 1 --vocab subword --vocab-size 400 --epochs 1)
check "average with an untagged run: a tagged run of 50 pairs" run 0 train "${few[@]}" --number-tags 1 --checkpoint "$dir/few_tags.safetensors"
check "  (its untagged twin)" run 0 train "${few[@]}" --checkpoint "$dir/few.safetensors"
check "  same subword model" test "$(st_meta "$dir/few.safetensors" vocab.src_model)" = "$(st_meta "$dir/few_tags.safetensors" vocab.src_model)"
check "  refused" run 1 average --out "$dir/tags_avg2.safetensors" "$dir/few_tags.safetensors" "$dir/few.safetensors"
check "  message" has err "few.safetensors: its vocab.number_tags is absent, .*few_tags.safetensors.s .1.: only checkpoints of one run are averaged"

# one model per language
check "train --vocab-share separate" run 0 train "${common[@]}" --vocab subword --vocab-size 500 --vocab-share separate --epochs 1 --checkpoint "$dir/sep.safetensors"
check "  two models" test "$(grep -Ec '^subword: an? (English|French) model' "$dir/err")" = 2
check "  translate" run 0 translate --checkpoint "$dir/sep.safetensors" "Go."

# one matrix for both embeddings and the output layer: stored once, exported under all three
# names (PyTorch's state_dict of the tied model has each)
check "train --share-embeddings 1" run 0 train "${common[@]}" --vocab subword --vocab-size 500 --share-embeddings 1 --embed-std 0.18 --epochs 1 --checkpoint "$dir/tied.safetensors"
check "  stored once" test "$(st_header "$dir/tied.safetensors" | grep -oE '"(en|de)coder\.(embedding|dense)\.weight"' | sort -u | tr '\n' ' ')" = '"encoder.embedding.weight" '
check "  translate" run 0 translate --checkpoint "$dir/tied.safetensors" "Go."
check "  export" run 0 export --checkpoint "$dir/tied.safetensors" --out "$dir/tied_plain.safetensors" --src-vocab "$dir/ts.txt" --tgt-vocab "$dir/tt.txt"
check "  exported under the three names" test "$(st_header "$dir/tied_plain.safetensors" | grep -oE '"(en|de)coder\.(embedding|dense)\.weight"' | sort -u | wc -l)" = 3
check "  imported back (a plain state_dict with the three names)" run 0 translate --checkpoint "$dir/tied_plain.safetensors" --src-vocab "$dir/ts.txt" --tgt-vocab "$dir/tt.txt" --share-embeddings 1 --embed-std 0.18 "▁Go ."
# as PyTorch would write it (no tapegrad metadata), with the output layer's copy changed
sed -e 's/"tapegrad\.checksum"/"userdata.checksum"/' -e 's/"tapegrad\.format"/"userdata.format"/' "$dir/tied_plain.safetensors" >"$dir/untied.safetensors"
hdr=$(st_header "$dir/untied.safetensors")
off=$(grep -o '"decoder.dense.weight":{[^}]*}' <<<"$hdr" | grep -o 'data_offsets":\[[0-9]*' | grep -o '[0-9]*$')
printf '\x3f' | dd of="$dir/untied.safetensors" bs=1 seek=$((8 + ${#hdr} + off + 1)) conv=notrunc 2>/dev/null
check "  a copy that differs is refused" run 1 translate --checkpoint "$dir/untied.safetensors" --src-vocab "$dir/ts.txt" --tgt-vocab "$dir/tt.txt" --share-embeddings 1 --embed-std 0.18 "▁Go ."
check "  message" has err "'decoder.dense.weight' differs from 'encoder.embedding.weight'"
check "--share-embeddings with word vocabularies" run 2 train --data "$data" --share-embeddings 1
check "  message" has err -- '--share-embeddings needs one vocabulary for both languages'
check "--share-embeddings with one model per language" run 2 train --data "$data" --vocab subword --vocab-share separate --share-embeddings 1
check "  message" has err -- '--vocab-share joint'

# bad flags
check "--vocab-size without --vocab subword" run 2 train --data "$data" --vocab-size 500
check "  message" has err -- '--vocab-size is for subword vocabularies: give --vocab subword'
check "--split-digits without --vocab subword" run 2 train --data "$data" --split-digits 1
check "  message" has err -- '--split-digits is for subword vocabularies: give --vocab subword'
check "--number-tags without --vocab subword" run 2 train --data "$data" --number-tags 1
check "  message" has err -- '--number-tags is for subword vocabularies: give --vocab subword'
check "--vocab-size too small" run 2 train --data "$data" --vocab subword --vocab-size 100
check "  message" has err -- '--vocab-size: expected an integer in \[300, 1000000\], got .100.'
check "--vocab unknown" run 2 train --data "$data" --vocab bpe
check "  message" has err -- '--vocab'
check "--min-freq with --vocab subword" run 2 train --data "$data" --vocab subword --min-freq 3
check "  message" has err -- '--min-freq is for word vocabularies'
check "--src-spm of a word checkpoint" run 0 train --data "$data" --epochs 1 --num-examples 200 --checkpoint "$dir/word.safetensors" --log-every 0
check "  refused" run 2 export --checkpoint "$dir/word.safetensors" --out "$dir/p.safetensors" --src-vocab "$dir/s.txt" --tgt-vocab "$dir/t.txt" --src-spm "$dir/x.model"
check "  message" has err 'word vocabularies, no subword model'
check "  word checkpoint still translates" run 0 translate --checkpoint "$dir/word.safetensors" "I'm home."

e2e_summary
