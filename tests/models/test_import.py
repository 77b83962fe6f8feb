"""The importers (models/rnntd_import) against the frameworks' own transcripts, from committed fixtures:
tests/data/mlperf (the MLPerf RNN-T reference: a random checkpoint in its layout made by its own model
code, its own features and greedy transcripts of fixed audio; models/rnntd_import/make_mlperf_fixture.py).
The C engine's CLI (RNNTD_CLI, set by ctest) must give the reference's tokens exactly; bad checkpoints
must give one-line errors naming what is wrong."""
import contextlib
import copy
import io
import json
import os
import shutil
import subprocess
import tempfile
import unittest
import wave

import numpy as np
import torch

import refpath
from rnntd_import import mlperf
from rnntd_import.common import CheckpointError
from rnntd_ref.audio_frontend import log_mel
from rnntd_ref.decode import greedy_decode
from rnntd_ref.io import load_model

MLPERF = os.path.join(refpath.ROOT, "tests", "data", "mlperf")


def read_wav(path):
    with wave.open(path, "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def run_import(mod, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = mod.main(argv)
    return rc, out.getvalue(), err.getvalue()


class TestMlperfImport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.model_dir = os.path.join(cls.tmp, "mlperf")
        rc, cls.out, err = run_import(mlperf, [os.path.join(MLPERF, "rnnt-small.pt"), cls.model_dir])
        assert rc == 0, err
        with open(os.path.join(MLPERF, "transcripts.json")) as fh:
            cls.ref = json.load(fh)["utterances"]
        cls.model, cls.tokens = load_model(cls.model_dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def wav(self, u):
        return read_wav(os.path.join(refpath.ROOT, u["wav"]))

    def test_report_names_what_was_mapped_and_verified(self):
        self.assertIn("StackTime x2", self.out)
        self.assertIn("featurizer.fb", self.out)
        self.assertRegex(self.out, r"encoder max \|diff\| 0")

    def test_features_match_the_reference_preprocessing(self):
        # the reference's AudioPreprocessing output (spliced and normalised) against FORMAT.md's stages
        # computed by rnntd_ref (torch.stft centring, the filterbank, stacking, per-feature statistics)
        cfg = self.model.cfg
        for name, u in self.ref.items():
            x = log_mel(cfg.frontend, self.wave_or(u), stacking=cfg.frame_stacking, dtype=torch.float64)
            ours = self.model.frontend(x.float()).double().numpy()
            ref = np.load(os.path.join(MLPERF, "features", name + ".npy"))
            self.assertEqual(ours.shape, ref.shape, name)
            self.assertLess(np.abs(ours - ref).max(), 2e-3, name)

    def wave_or(self, u):
        return torch.from_numpy(self.wav(u))

    def test_reference_decoder_tokens_equal_the_frameworks(self):
        cfg = self.model.cfg
        for name, u in self.ref.items():
            x = log_mel(cfg.frontend, self.wave_or(u), stacking=cfg.frame_stacking)
            toks, _ = greedy_decode(self.model, x)
            self.assertEqual([int(t) for t in toks], u["tokens"], name)

    def test_engine_cli_tokens_equal_the_frameworks(self):
        cli = os.environ.get("RNNTD_CLI")
        if not cli or not os.path.exists(cli):
            self.skipTest("RNNTD_CLI not set (ctest sets it)")
        names = list(self.ref)
        files = [os.path.join(refpath.ROOT, self.ref[n]["wav"]) for n in names]
        p = subprocess.run([cli, "--model", self.model_dir, "--format", "json", "--backend", "cpu"] + files,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        self.assertEqual(len(lines), len(names))
        for n, got in zip(names, lines):
            self.assertEqual([t["id"] for t in got["tokens"]], self.ref[n]["tokens"], n)
            self.assertEqual(got["encoder_frames"], -(-self.ref[n]["feature_frames"] // 2), n)


class TestMlperfBadCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ckpt = torch.load(os.path.join(MLPERF, "rnnt-small.pt"), map_location="cpu")
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def convert_err(self, sd):
        with self.assertRaises(CheckpointError) as cm:
            mlperf.convert({"state_dict": sd})
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        return msg

    def sd(self):
        return copy.deepcopy(self.ckpt["state_dict"])

    def test_missing_key(self):
        sd = self.sd()
        del sd["encoder.post_rnn.lstm.bias_hh_l1"]
        self.assertIn("encoder.post_rnn.lstm.bias_hh_l1: missing", self.convert_err(sd))

    def test_conformer_encoder(self):
        sd = self.sd()
        sd["encoder.layers.0.self_attn.linear_q.weight"] = torch.zeros(4, 4)
        self.assertIn("conformers", self.convert_err(sd))

    def test_vocabulary_mismatch(self):
        with self.assertRaises(CheckpointError) as cm:
            mlperf.convert(self.ckpt, labels=mlperf.DEFAULT_LABELS[:-1])
        self.assertIn("prediction.embed.weight: 28 labels, the vocabulary has 27", str(cm.exception))

    def test_bidirectional_and_projected(self):
        sd = self.sd()
        sd["encoder.pre_rnn.lstm.weight_ih_l0_reverse"] = sd["encoder.pre_rnn.lstm.weight_ih_l0"]
        self.assertIn("bidirectional", self.convert_err(sd))
        sd = self.sd()
        sd["prediction.dec_rnn.lstm.weight_hr_l0"] = torch.zeros(8, 32)
        self.assertIn("proj_size", self.convert_err(sd))

    def test_wrong_shapes(self):
        sd = self.sd()
        sd["joint_net.3.weight"] = sd["joint_net.3.weight"][:-1]
        self.assertIn("joint_net.3.weight: shape", self.convert_err(sd))
        sd = self.sd()
        sd["encoder.pre_rnn.lstm.weight_ih_l0"] = sd["encoder.pre_rnn.lstm.weight_ih_l0"][:, :80]
        self.assertIn("frame_splicing", self.convert_err(sd))
        sd = self.sd()
        sd["audio_preprocessor.featurizer.fb"] = sd["audio_preprocessor.featurizer.fb"] * 1.01
        self.assertIn("differs from the slaney filterbank", self.convert_err(sd))

    def test_non_finite(self):
        sd = self.sd()
        sd["joint_net.0.bias"][3] = float("nan")
        self.assertIn("joint_net.0.bias: holds non-finite values", self.convert_err(sd))

    def test_unsupported_frontend_settings(self):
        for key, val, want in (("normalize", "all_features", "input_eval.normalize"), ("window", "blackman", "input_eval.window"),
                               ("pad_to", 8, "input_eval.pad_to"), ("bogus", 1, "input_eval.bogus")):
            inp = dict(mlperf.DEFAULT_INPUT, **{key: val})
            with self.assertRaises(CheckpointError) as cm:
                mlperf.convert(self.ckpt, inp=inp)
            self.assertIn(want, str(cm.exception))

    def test_cli_one_line_errors_and_nothing_written(self):
        bad = os.path.join(self.tmp, "bad.pt")
        with open(bad, "wb") as fh:
            fh.write(b"not a checkpoint")
        out = os.path.join(self.tmp, "out")
        rc, _, err = run_import(mlperf, [bad, out])
        self.assertEqual(rc, 1)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("not a readable PyTorch checkpoint", err)
        self.assertFalse(os.path.exists(out))
        sd = self.sd()
        del sd["prediction.embed.weight"]
        p = os.path.join(self.tmp, "nokey.pt")
        torch.save({"state_dict": sd}, p)
        rc, _, err = run_import(mlperf, [p, out])
        self.assertEqual(rc, 1)
        self.assertIn("prediction.embed.weight: missing", err)
        self.assertFalse(os.path.exists(out))



NEMO_FE = os.path.join(refpath.ROOT, "tests", "data", "nemo", "frontend")


class TestNemoFrontend(unittest.TestCase):
    """NeMo's own preprocessor output (tests/data/nemo/frontend, written with NeMo by
    models/rnntd_import/make_nemo_frontend_fixture.py) against its mapped rnntd frontend."""

    def test_mapped_frontend_reproduces_nemo_features(self):
        from rnntd_import.nemo_frontend import frontend_from_preprocessor
        from rnntd_ref.model import per_feature_normalize
        with open(os.path.join(NEMO_FE, "index.json")) as fh:
            index = json.load(fh)
        for case in index["cases"]:
            fe = frontend_from_preprocessor(index["settings"][case["settings"]])
            x = log_mel(fe, torch.from_numpy(read_wav(os.path.join(refpath.ROOT, case["wav"]))), dtype=torch.float32)
            if fe.normalize == "per_feature":
                x = per_feature_normalize(x)
            ref = np.load(os.path.join(NEMO_FE, case["name"] + ".npy"))
            self.assertEqual(tuple(x.shape), ref.shape, case["name"])
            # float32 on both sides; NeMo takes sqrt then ^2 where FORMAT.md squares |X| once
            self.assertLess(float(np.abs(x.numpy() - ref).max()), 2e-3, case["name"])

    def test_unsupported_settings_name_the_key(self):
        from rnntd_import.nemo_frontend import frontend_from_preprocessor
        for key, val in (("exact_pad", True), ("frame_splicing", 3), ("use_torchaudio", True), ("normalize", "all_features"),
                         ("window", "blackman"), ("log", False), ("bogus", 1), ("_target_", "nemo.x.AudioToMFCCPreprocessor")):
            with self.assertRaises(CheckpointError) as cm:
                frontend_from_preprocessor({key: val})
            self.assertIn(f"preprocessor.{key}", str(cm.exception))

    def test_engine_frontend_with_nemo_settings_decodes_as_the_reference(self):
        """A random model with NeMo's mapped frontend (centred STFT, ln(x + 2^-24), per-feature statistics
        before stacking): the C CLI from the WAVs gives the tokens rnntd_ref gives from NeMo's own features."""
        cli = os.environ.get("RNNTD_CLI")
        if not cli or not os.path.exists(cli):
            self.skipTest("RNNTD_CLI not set (ctest sets it)")
        from rnntd_import.nemo_frontend import frontend_from_preprocessor
        from rnntd_ref.io import save_model
        from rnntd_ref.model import RNNTModel
        from rnntd_ref.random_model import build_config, default_tokens, random_model
        with open(os.path.join(NEMO_FE, "index.json")) as fh:
            index = json.load(fh)
        fe = frontend_from_preprocessor(index["settings"]["lstm-default"])
        base = build_config(feature_dim=80, frame_stacking=2, encoder_hidden=(48, 40), time_stacks=(2, 1),
                            predictor_hidden=(32,), lstm_activation="soft", normalize="none", max_symbols=5)
        calibrated, _ = random_model(base, seed=5, label_rate=0.3, calib_utts=16)
        cfg = copy.deepcopy(base)
        cfg.frontend = fe
        model = RNNTModel(cfg)
        model.load_state_dict(calibrated.state_dict())
        model.eval()
        tmp = tempfile.mkdtemp()
        try:
            save_model(model, default_tokens(cfg.vocab_size), tmp)
            cases = [c for c in index["cases"] if c["settings"] == "lstm-default"]
            p = subprocess.run([cli, "--model", tmp, "--format", "json", "--backend", "cpu"] +
                               [os.path.join(refpath.ROOT, c["wav"]) for c in cases], capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
            total = 0
            for c, g in zip(cases, got):
                feats = torch.from_numpy(np.load(os.path.join(NEMO_FE, c["name"] + ".npy")))
                # NeMo's features are already normalised: the reference takes them through its encoder
                # with the statistics step skipped (normalising normalised features is not the identity)
                ref_model = RNNTModel(base)
                ref_model.load_state_dict(model.state_dict())
                toks, _ = greedy_decode(ref_model.eval(), feats)
                self.assertEqual([t["id"] for t in g["tokens"]], [int(t) for t in toks], c["name"])
                total += len(toks)
            self.assertGreater(total, 0)
            print(f"  {total} tokens over {len(cases)} clips equal")
        finally:
            shutil.rmtree(tmp)


NEMO = os.path.join(refpath.ROOT, "tests", "data", "nemo", "models")


class TestNemoImport(unittest.TestCase):
    """The NeMo importer against NeMo's own greedy transcripts (tests/data/nemo/models, written with NeMo
    2.1.0 by models/rnntd_import/make_nemo_fixture.py): tiny LSTM transducers, RNNEncoder with stacking
    subsampling x4, projection LSTMs and LayerNorm, characters (plain RNN-T and multi-blank [2, 4]) and
    SentencePiece BPE (multi-blank [2, 4]). The reference and
    the C CLI (CPU) must give NeMo's tokens; on these clips NeMo's per-utterance `greedy` and its batched
    `greedy_batch` (one utterance per batch) agree, so one token list is both."""

    @classmethod
    def setUpClass(cls):
        from rnntd_import import nemo
        cls.tmp = tempfile.mkdtemp()
        with open(os.path.join(NEMO, "index.json")) as fh:
            cls.index = json.load(fh)
        cls.dirs, cls.outs = {}, {}
        for name, m in cls.index["models"].items():
            d = os.path.join(cls.tmp, name)
            rc, cls.outs[name], err = run_import(nemo, [os.path.join(NEMO, m["file"]), d])
            assert rc == 0, err
            cls.dirs[name] = d

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_report_names_what_was_mapped_and_verified(self):
        out = self.outs["char-multiblank"]
        self.assertIn("StackingSubsampling x4", out)
        self.assertIn("stacking_tail drop", out)
        self.assertIn("LSTM(hidden 48, proj 32) + LayerNorm(32)", out)
        self.assertIn("big blanks [2, 4]", out)
        self.assertIn("featurizer.fb", out)
        self.assertRegex(out, r"encoder max \|diff\| [0-9.e-]+, predictor max \|diff\| 0")
        self.assertIn("40 SentencePiece pieces (bpe;", self.outs["bpe-multiblank"])

    def test_nemo_greedy_equals_greedy_batch_on_the_fixtures(self):
        for name, m in self.index["models"].items():
            for s in ("greedy", "greedy_batch"):
                self.assertEqual(len(m["transcripts"][s]), len(self.index["clips"]))
            self.assertEqual([u["tokens"] for u in m["transcripts"]["greedy"]],
                             [u["tokens"] for u in m["transcripts"]["greedy_batch"]], name)

    def test_reference_tokens_equal_nemos(self):
        total = 0
        for name, m in self.index["models"].items():
            model, _ = load_model(self.dirs[name])
            for clip, ref in zip(self.index["clips"], m["transcripts"]["greedy"]):
                x = log_mel(model.cfg.frontend, torch.from_numpy(read_wav(os.path.join(refpath.ROOT, clip))),
                            stacking=model.cfg.frame_stacking)
                self.assertEqual(x.shape[0], ref["feature_frames"], clip)
                f, _ = model.encode(x)
                self.assertEqual(f.shape[0], ref["encoder_frames"], clip)
                toks, _ = greedy_decode(model, x)
                self.assertEqual([int(t) for t in toks], ref["tokens"], f"{name} {clip}")
                total += len(toks)
        self.assertGreater(total, 100)

    def test_committed_conversions_are_current(self):
        # tests/data/nemo/imported (read by the C tests engine_test_nemo and gpu_test_nemo, which have
        # no torch) must be exactly what the importer writes today
        for name, d in self.dirs.items():
            for f in ("model.yaml", "tokens.txt", "weights.safetensors"):
                with open(os.path.join(d, f), "rb") as a, open(os.path.join(NEMO, "..", "imported", name, f), "rb") as b:
                    self.assertEqual(a.read(), b.read(), f"tests/data/nemo/imported/{name}/{f} is stale: rerun "
                                     f"python3 -m rnntd_import.nemo tests/data/nemo/models/{name}.nemo "
                                     f"tests/data/nemo/imported/{name} --force")

    def test_engine_cli_tokens_equal_nemos(self):
        cli = os.environ.get("RNNTD_CLI")
        if not cli or not os.path.exists(cli):
            self.skipTest("RNNTD_CLI not set (ctest sets it)")
        files = [os.path.join(refpath.ROOT, c) for c in self.index["clips"]]
        for name, m in self.index["models"].items():
            p = subprocess.run([cli, "--model", self.dirs[name], "--format", "json", "--backend", "cpu"] + files,
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
            self.assertEqual(len(got), len(files))
            for clip, g, ref in zip(self.index["clips"], got, m["transcripts"]["greedy"]):
                self.assertEqual([t["id"] for t in g["tokens"]], ref["tokens"], f"{name} {clip}")
                self.assertEqual(g["encoder_frames"], ref["encoder_frames"], f"{name} {clip}")


class TestNemoBadCheckpoints(unittest.TestCase):
    """One-line errors naming what is unsupported or wrong; nothing written."""

    @classmethod
    def setUpClass(cls):
        from rnntd_import import nemo
        cls.nemo = nemo
        cls.cfg, cls.sd = nemo.read_nemo(os.path.join(NEMO, "char-multiblank.nemo"))
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def err(self, cfg=None, sd=None, files=None):
        with self.assertRaises(CheckpointError) as cm:
            self.nemo.convert(cfg if cfg is not None else copy.deepcopy(self.cfg),
                              sd if sd is not None else dict(self.sd), "x", "m.nemo", files=files)
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        return msg

    def cfg_with(self, section, **kv):
        c = copy.deepcopy(self.cfg)
        c[section].update(kv)
        return c

    def test_unsupported_encoders(self):
        c = self.cfg_with("encoder", _target_="nemo.collections.asr.modules.ConformerEncoder")
        self.assertIn("encoder._target_: 'nemo.collections.asr.modules.ConformerEncoder' is not supported", self.err(c))
        self.assertIn("encoder.bidirectional", self.err(self.cfg_with("encoder", bidirectional=True)))
        self.assertIn("encoder.rnn_type: 'gru'", self.err(self.cfg_with("encoder", rnn_type="gru")))
        self.assertIn("encoder.subsampling: 'striding'", self.err(self.cfg_with("encoder", subsampling="striding")))
        self.assertIn("preprocessor.pad_to: 6", self.err(self.cfg_with("preprocessor", pad_to=6)))

    def test_missing_and_unexpected_keys(self):
        sd = dict(self.sd)
        del sd["encoder.layers.3.weight_hr_l0"]
        self.assertIn("encoder.layers.3.weight_hr_l0: missing", self.err(sd=sd))
        sd = dict(self.sd)
        del sd["encoder.layers.4.bias"]
        self.assertIn("encoder.layers.4.bias: missing", self.err(sd=sd))
        sd = dict(self.sd)
        del sd["encoder.pre_encode.proj_out.weight"]
        self.assertIn("encoder.pre_encode.proj_out.weight: missing", self.err(sd=sd))
        sd = dict(self.sd)
        sd["encoder.layers.6.weight_ih_l0"] = sd["encoder.layers.3.weight_ih_l0"]
        self.assertIn("encoder.layers.6.weight_ih_l0: unexpected tensor", self.err(sd=sd))
        sd = dict(self.sd)
        sd["encoder.layers.0.weight_ih_l0_reverse"] = sd["encoder.layers.0.weight_ih_l0"]
        self.assertIn("bidirectional", self.err(sd=sd))

    def test_mismatched_vocabularies(self):
        c = copy.deepcopy(self.cfg)
        c["labels"] = c["labels"][:-1]
        self.assertIn("decoder.vocab_size: 28 differs from the 27 labels", self.err(c))
        c = copy.deepcopy(self.cfg)
        c["labels"][3] = c["labels"][2]
        self.assertIn("labels: repeated label", self.err(c))
        sd = dict(self.sd)
        sd["joint.joint_net.1.weight"] = sd["joint.joint_net.1.weight"][:-1]
        sd["joint.joint_net.1.bias"] = sd["joint.joint_net.1.bias"][:-1]
        self.assertIn("mismatched vocabulary", self.err(sd=sd))
        c = copy.deepcopy(self.cfg)
        c["tokenizer"] = {"type": "bpe", "dir": "tok"}
        self.assertIn("tokenizer.model_path: missing", self.err(c))
        c["tokenizer"] = {"type": "wpe", "dir": "tok"}
        self.assertIn("tokenizer.type: 'wpe' is not supported", self.err(c))
        c["tokenizer"] = {"type": "bpe", "model_path": "nemo:abc_tokenizer.model"}
        self.assertIn("abc_tokenizer.model is not in the archive", self.err(c))

    def test_sentencepiece_pieces_read_without_the_library(self):
        # a ModelProto written field by field: pieces (field 1) of {piece (1), score (2, float), type (3)}
        def field(num, payload):
            n, out = len(payload), bytearray([num << 3 | 2])
            while True:
                out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
                n >>= 7
                if not n:
                    break
            return bytes(out) + payload
        import struct
        want = ["<unk>", "\u2581the", "s", "\u2581caf\u00e9"]
        proto = b"".join(field(1, field(1, p.encode("utf-8")) + b"\x15" + struct.pack("<f", -1.5) + b"\x18\x01")
                         for p in want) + field(2, b"\x0a\x00")  # trainer_spec after the pieces
        self.assertEqual(self.nemo.sentencepiece_pieces(proto), want)
        with self.assertRaises(ValueError):
            self.nemo.sentencepiece_pieces(proto[:-5] + b"\x0a\xff")
        c = copy.deepcopy(self.cfg)
        c["labels"] = None
        c["tokenizer"] = {"type": "bpe", "model_path": "nemo:abc_tokenizer.model"}
        self.assertIn("decoder.vocab_size: 28 differs from the 4 labels",
                      self.err(c, files={"abc_tokenizer.model": proto}))

    def test_multiblank_settings(self):
        c = copy.deepcopy(self.cfg)
        c["decoding"]["big_blank_durations"] = [2, 8]
        self.assertIn("big_blank_durations differ", self.err(c))
        c = copy.deepcopy(self.cfg)
        c["joint"]["num_extra_outputs"] = 1
        self.assertIn("joint.num_extra_outputs: 1, but 2 big blank durations", self.err(c))
        c = copy.deepcopy(self.cfg)
        c["decoding"]["durations"] = [0, 1, 2]
        self.assertIn("TDT", self.err(c))
        c = copy.deepcopy(self.cfg)
        c["joint"]["jointnet"]["activation"] = "sigmoid"
        self.assertIn("joint.jointnet.activation: 'sigmoid'", self.err(c))

    def test_bpe_multiblank_needs_model_type_multiblank(self):
        cfg, sd, files = self.nemo.read_nemo(os.path.join(NEMO, "bpe-multiblank.nemo"), with_files=True)
        self.nemo.convert(copy.deepcopy(cfg), dict(sd), "x", "m.nemo", files=files)  # as saved: converts
        cfg["decoding"]["model_type"] = "rnnt"
        self.assertIn("decoding.model_type: 'rnnt', but a multi-blank model with a tokenizer needs multiblank",
                      self.err(cfg, dict(sd), files))

    def test_cli_one_line_errors_and_nothing_written(self):
        bad = os.path.join(self.tmp, "bad.nemo")
        with open(bad, "wb") as fh:
            fh.write(b"not a tar")
        out = os.path.join(self.tmp, "out")
        rc, _, err = run_import(self.nemo, [bad, out])
        self.assertEqual(rc, 1)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("not a .nemo archive", err)
        self.assertFalse(os.path.exists(out))
        import tarfile
        conf = os.path.join(self.tmp, "conformer.nemo")
        with tarfile.open(conf, "w") as tf:
            c = copy.deepcopy(self.cfg)
            c["encoder"]["_target_"] = "nemo.collections.asr.modules.ConformerEncoder"
            data = yaml_dump(c)
            ti = tarfile.TarInfo("./model_config.yaml")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
            buf = io.BytesIO()
            torch.save(self.sd, buf)
            ti = tarfile.TarInfo("./model_weights.ckpt")
            ti.size = len(buf.getvalue())
            tf.addfile(ti, io.BytesIO(buf.getvalue()))
        rc, _, err = run_import(self.nemo, [conf, out])
        self.assertEqual(rc, 1)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("ConformerEncoder", err)
        self.assertFalse(os.path.exists(out))


def yaml_dump(d):
    import yaml
    return yaml.safe_dump(d).encode("utf-8")


if __name__ == "__main__":
    unittest.main()
