"""NeMo's batched greedy decoding (`greedy_batch`) of all the fixture's clips as ONE batch, against its
per-utterance `greedy` transcripts in tests/data/nemo/models/index.json (which the fixture made one
utterance per call). Shows where NeMo's batched multi-blank decoder depends on the batch. Needs NeMo:

    cd models && ../.venv-nemo/bin/python -m rnntd_import.check_nemo_batched
"""
import json
import os
import wave

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def read_wav(p):
    with wave.open(p) as w: return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def main():
    from nemo.collections.asr.models import ASRModel
    from omegaconf import OmegaConf
    idx = json.load(open(ROOT + "/tests/data/nemo/models/index.json"))
    waves = [read_wav(os.path.join(ROOT, c)) for c in idx["clips"]]
    for name, m in idx["models"].items():
        model = ASRModel.restore_from(os.path.join(ROOT, "tests/data/nemo/models", m["file"]), map_location="cpu").eval()
        dec = OmegaConf.to_container(model.cfg.decoding); dec["strategy"] = "greedy_batch"
        model.change_decoding_strategy(OmegaConf.create(dec), verbose=False)
        L = max(len(w) for w in waves)
        x = torch.zeros(len(waves), L)
        for i, w in enumerate(waves): x[i, :len(w)] = torch.from_numpy(w)
        lens = torch.tensor([len(w) for w in waves])
        with torch.no_grad():
            f, fl = model.preprocessor(input_signal=x, length=lens)
            e, el = model.encoder(audio_signal=f, length=fl)
            hyps = model.decoding.rnnt_decoder_predictions_tensor(encoder_output=e, encoded_lengths=el, return_hypotheses=True)
        hyps = hyps[0] if isinstance(hyps, tuple) else hyps
        same = 0
        for i, h in enumerate(hyps):
            ys = h.y_sequence.tolist() if torch.is_tensor(h.y_sequence) else list(h.y_sequence)
            ref = m["transcripts"]["greedy"][i]
            ok = [int(t) for t in ys] == ref["tokens"]
            same += ok
            print(f"{name} {os.path.basename(idx['clips'][i])}: batch-of-7 greedy_batch {len(ys)} tokens, per-utterance greedy {len(ref['tokens'])}: {'same' if ok else 'DIFFERENT'}; encoder frames {int(el[i])} vs {ref['encoder_frames']}")
        print(f"{name}: {same}/{len(hyps)} equal")


if __name__ == "__main__":
    main()
