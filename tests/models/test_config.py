"""rnntd_ref.config: FORMAT.md's example parses, save/load round trips, every rule fails with its key."""
import os
import re
import tempfile
import unittest

import refpath
from rnntd_ref.config import ConfigError, config_to_yaml, load_config, parse_config, save_config, validate
from rnntd_ref.random_model import build_config, preset_config


def format_md_example():
    text = open(os.path.join(refpath.MODELS, "FORMAT.md"), encoding="utf-8").read()
    return re.search(r"```yaml\n(.*?)```", text, re.S).group(1)


class TestConfig(unittest.TestCase):
    def setUp(self):
        self.example = format_md_example()

    def test_format_md_example(self):
        cfg = parse_config(self.example)
        self.assertEqual(cfg.name, "tiny-hard")
        self.assertEqual(cfg.frontend.preemphasis, 0.97)
        self.assertEqual(cfg.frontend.log_floor, 1e-10)
        self.assertEqual([(l.input, l.hidden, l.time_stack) for l in cfg.encoder.layers],
                         [(240, 64, 1), (64, 64, 2), (128, 64, 1)])
        self.assertEqual(cfg.big_blank_durations, [2, 4, 8])
        self.assertEqual((cfg.n_out, cfg.blank, cfg.subsampling), (32, 31, 6))
        # NeMo layout: V skips 8, V+1 skips 4, V+2 skips 2, V+3 is the blank
        self.assertEqual([cfg.big_blank_duration(k) for k in range(27, 32)], [0, 8, 4, 2, 0])
        self.assertEqual([cfg.encoder_frames(t) for t in (0, 1, 6, 7, 12, 13)], [0, 1, 1, 2, 2, 3])

    def test_round_trip(self):
        for cfg in (parse_config(self.example), preset_config("mlperf"),
                    build_config(name="x.y-z", big_blank_durations=[], normalize="none")):
            with tempfile.TemporaryDirectory() as d:
                p = os.path.join(d, "model.yaml")
                save_config(cfg, p)
                back = load_config(p)
                self.assertEqual(back, cfg)
                save_config(back, p + "2")
                self.assertEqual(open(p, "rb").read(), open(p + "2", "rb").read())

    def test_saved_layout(self):
        text = config_to_yaml(parse_config(self.example))
        self.assertIn("    - {input: 64, hidden: 64, time_stack: 2}\n", text)
        self.assertIn("    - {input: 240, hidden: 64}\n", text)
        self.assertIn("big_blank_durations: [2, 4, 8]\n", text)
        self.assertIn("  log_floor: 1.0e-10\n", text)
        keys = [line.split(":")[0] for line in text.splitlines() if not line.startswith(" ")]
        self.assertEqual(keys, ["format", "version", "name", "frontend", "feature_dim", "frame_stacking",
                                "lstm_activation", "encoder", "predictor", "joint", "vocab_size",
                                "big_blank_durations", "max_symbols"])
        # names YAML would read as another type are quoted
        cfg = build_config(name="1.5")
        self.assertIn('name: "1.5"', config_to_yaml(cfg))
        self.assertEqual(parse_config(config_to_yaml(cfg)).name, "1.5")

    def test_optional_keys_default(self):
        text = "\n".join(line for line in self.example.splitlines()
                         if not re.match(r"\s+(preemphasis|dither|center|power|mel_norm):", line))
        cfg = parse_config(text)
        fe = cfg.frontend
        self.assertEqual((fe.preemphasis, fe.dither, fe.center, fe.power, fe.mel_norm),
                         (0.0, 0.0, False, 2.0, "slaney"))
        self.assertEqual(cfg.encoder.layers[0].time_stack, 1)

    def bad(self, old, new, key, why=""):
        text = self.example.replace(old, new, 1)
        self.assertNotEqual(text, self.example, f"{old!r} not in the example")
        with self.assertRaises(ValueError) as cm:
            parse_config(text, "m.yaml")
        msg = str(cm.exception)
        self.assertRegex(msg, r"^m\.yaml:\d+:\d+: ", msg)
        self.assertIn(key, msg)
        self.assertIn(why, msg)
        return msg

    def test_errors_name_key_and_position(self):
        msg = self.bad("max_symbols: 10", "max_symbols: 10\nextra: 1", "extra", "unknown key")
        line = [l.startswith("max_symbols:") for l in self.example.splitlines()].index(True) + 2
        self.assertTrue(msg.startswith(f"m.yaml:{line}:1: extra: unknown key"), msg)
        msg = self.bad("n_fft: 512", "n_fft: 300", "frontend.n_fft")
        self.assertTrue(msg.startswith(f"m.yaml:{self.example[:self.example.index('n_fft:')].count(chr(10)) + 1}:10:"), msg)
        self.bad("  dither: 0.0 ", "  dither: 0.0\n  speed: 2\n ", "frontend.speed", "unknown key")
        self.bad("{input: 64, hidden: 64, time_stack: 2}", "{input: 64, hidden: 64, stack: 2}",
                 "encoder.layers[1].stack", "unknown key")
        self.bad("vocab_size: 28", "", "vocab_size", "required key missing")
        self.bad("format: rnntd", "format: onnx", "format")
        self.bad("version: 1", "version: 2", "version", "unsupported version")
        self.bad("name: tiny-hard", "name: tiny hard!", "name")
        self.bad("max_symbols: 10", "max_symbols: 0", "max_symbols", "[1, 1000]")
        self.bad("max_symbols: 10", "max_symbols: 10.5", "max_symbols", "integer")
        self.bad("max_symbols: 10", "max_symbols: '10'", "max_symbols", "integer")
        self.bad("big_blank_durations: [2, 4, 8]", "big_blank_durations: [2, 4, 2]", "big_blank_durations[2]", "duplicate")
        self.bad("big_blank_durations: [2, 4, 8]", "big_blank_durations: [1, 4]", "big_blank_durations[0]", "[2, 1000]")
        self.bad("big_blank_durations: [2, 4, 8]", "big_blank_durations: [2,3,4,5,6,7,8,9,10]",
                 "big_blank_durations", "at most 8")
        self.bad("{input: 240, hidden: 64}", "{input: 241, hidden: 64}", "encoder.layers[0].input", "240")
        self.bad("{input: 128, hidden: 64}", "{input: 64, hidden: 64}", "encoder.layers[2].input", "128")
        self.bad("    - {input: 32, hidden: 64}", "    - {input: 33, hidden: 64}", "predictor.layers[0].input")
        self.bad("    - {input: 128, hidden: 64}", "    - {input: 128, hidden: 64, time_stack: 2}",
                 "encoder.layers[2].time_stack", "last encoder layer")
        self.bad("{input: 64, hidden: 64, time_stack: 2}", "{input: 64, hidden: 64, time_stack: 17}",
                 "encoder.layers[1].time_stack", "[1, 16]")
        self.bad("frame_stacking: 3", "frame_stacking: 0", "frame_stacking")
        self.bad("feature_dim: 80", "feature_dim: 40", "feature_dim", "n_mels")
        self.bad("lstm_activation: hard", "lstm_activation: relu", "lstm_activation")
        self.bad("activation: relu", "activation: gelu", "joint.activation")
        self.bad("window: hann", "window: kaiser", "frontend.window")
        self.bad("n_fft: 512", "n_fft: 300", "frontend.n_fft", "win_length")
        self.bad("hop_length: 160", "hop_length: 500", "frontend.hop_length")
        self.bad("f_max: 8000.0", "f_max: 9000.0", "frontend.f_max", "sample_rate/2")
        self.bad("f_min: 0.0", "f_min: 8000.0", "frontend.f_max", "f_min")
        self.bad("log_floor: 1.0e-10", "log_floor: 0", "frontend.log_floor")
        self.bad("log_floor: 1.0e-10", "log_floor: .nan", "frontend.log_floor", "finite")
        self.bad("center: false", "center: yes", "frontend.center", "true or false")
        self.bad("dim: 64", "dim: 16385", "joint.dim", "[1, 16384]")
        self.bad("sample_rate: 16000", "sample_rate: 500", "frontend.sample_rate", "[1000, 384000]")
        self.bad("power: 2.0", "power: 0.0", "frontend.power")
        self.bad("preemphasis: 0.97", "preemphasis: 1.5", "frontend.preemphasis")
        self.bad("dither: 0.0", "dither: -1.0", "frontend.dither")
        self.bad("vocab_size: 28", "vocab_size: 28\nvocab_size: 29", "vocab_size", "duplicate key")
        self.bad("embedding: 32", "embedding: [32]", "predictor.embedding")
        self.bad("layers:\n    - {input: 32", "layers: []\n    #", "predictor.layers", "at least one")

    def test_syntax_error_position(self):
        with self.assertRaises(ValueError) as cm:
            parse_config("format: rnntd\nversion: [1\n", "m.yaml")
        self.assertRegex(str(cm.exception), r"^m\.yaml:\d+:\d+: YAML syntax error")
        with self.assertRaisesRegex(ValueError, "exactly one YAML document"):
            parse_config("", "m.yaml")

    def test_validate_names_the_key(self):
        cfg = build_config()
        cfg.joint.dim = 0
        with self.assertRaises(ConfigError) as cm:
            validate(cfg)
        self.assertEqual(cm.exception.key, "joint.dim")
        self.assertIsInstance(cm.exception, ValueError)
        cfg = build_config()
        cfg.frontend.std = 1
        cfg.predictor.layers[0].input += 1
        with self.assertRaisesRegex(ValueError, r"^predictor\.layers\[0\]\.input"):
            validate(cfg)


if __name__ == "__main__":
    unittest.main()
