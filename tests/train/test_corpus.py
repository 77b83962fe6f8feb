"""Corpus scripts: text normalisation, the split, synthesis specs; synthesis itself when the engines exist."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
from rnntd_corpus import build_text, synth
from rnntd_train.data import decode_ids, encode_text, error_rates


class TestText(unittest.TestCase):
    def test_normalise(self):
        n = build_text.normalise
        self.assertEqual(n("\u201cIt\u2019s Mr. Brown\u2019s well-made boat,\u201d she said."),
                         "it's mister brown's well made boat she said")
        self.assertIsNone(n("He paid 20 dollars for it."))          # digits
        self.assertIsNone(n("The NASA probe flew by."))              # acronym
        self.assertIsNone(n("Chapter XII begins here now."))         # roman numeral
        self.assertIsNone(n("Too short"))
        self.assertEqual(n("'Tis the 'end' of days' work"), "tis the end of days work")
        self.assertEqual(n("Caf\u00e9 na\u00efve r\u00e9sum\u00e9 here"), "cafe naive resume here")

    def test_split_is_a_function_of_the_sentence(self):
        s = "they entered into the land of canaan"
        self.assertEqual(build_text.split_of(s, 5, 5), build_text.split_of(s, 5, 5))
        got = {build_text.split_of("sentence number %d" % i, 5, 5) for i in range(3000)}
        self.assertEqual(got, {"train", "dev", "test"})

    def test_tokens_roundtrip(self):
        ids = encode_text("it's a test")
        self.assertEqual(ids[:4], [10, 21, 1, 20])
        self.assertEqual(decode_ids(ids), "it's a test")
        self.assertEqual(error_rates([("a b c", "a x c")])[:2], (1 / 3, 1 / 5))


TRAIN_VOICES = {"espeak": ["m1", "klatt"], "mbrola": ["mb-en1", "mb-us1"], "flite": ["kal16", "slt"],
                "festival": ["ked_diphone"], "hibari": ["heart"]}
HELDOUT_VOICES = {"mbrola": ["mb-us2", "mb-us3"], "festival": ["rab_diphone", "us2_mbrola"], "piper": ["joe"]}
PHONEMES = [{"text": "a phonemised sentence", "phonemes": "ə fˈOnəmˌIzd sˈɛntəns"}]


class TestSynthSpecs(unittest.TestCase):
    def specs(self, seed, split="train", n=400):
        voices = TRAIN_VOICES if split == "train" else HELDOUT_VOICES
        return [synth.utterance_spec(seed, i, "hello there", 0.5, voices, split, PHONEMES) for i in range(n)]

    def test_specs_deterministic_and_mixed(self):
        a, b, c = self.specs(3), self.specs(3), self.specs(4)
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)
        self.assertEqual({s["engine"] for s in a}, set(TRAIN_VOICES))
        share = sum(1 for s in a if s["aug"]) / len(a)
        self.assertTrue(0.4 < share < 0.6, share)
        for s in a:
            fx = synth.sox_effects(s)
            self.assertEqual(fx[:2], ["norm", "-3"])
            self.assertIn("16000", fx)
            self.assertTrue(0.05 <= s["pad"][0] <= 1.0 and 0.05 <= s["pad"][1] <= 1.0, s["pad"])
            if s["aug"]:
                self.assertTrue(-40 <= s["aug"]["level"] <= -1, s["aug"])
            if s["engine"] == "hibari":          # hibari reads its own phonemised sentences
                self.assertEqual((s["text"], s["phonemes"]), (PHONEMES[0]["text"], PHONEMES[0]["phonemes"]))
        vtlp = [s["vtlp"] for s in a]
        self.assertTrue(all(0.88 <= v <= 1.12 for v in vtlp))
        self.assertTrue(0.6 < sum(v != 1.0 for v in vtlp) / len(vtlp) < 0.8)
        codecs = {s["aug"].get("codec", [None])[0] for s in a if s["aug"]}
        self.assertTrue({"gsm", "mp3"} <= codecs, codecs)

    def test_held_out_voices_never_train(self):
        train = {(e, v) for e, t in synth.VOICES.items() for v, sp in t.items() if sp == "train"}
        held = {(e, v) for e, t in synth.VOICES.items() for v, sp in t.items() if sp == "heldout"}
        self.assertFalse(train & held)
        self.assertTrue(any(e in ("piper", "hibari") for e, _ in held), "a neural voice is held out")
        self.assertTrue(any(e in ("festival", "mbrola", "flite", "espeak") for e, _ in held), "a classic one too")
        for s in self.specs(5, "heldout"):
            self.assertIn((s["engine"], s["voice"]), held)
            self.assertEqual(s["vtlp"], 1.0)               # the test is not perturbed
        if os.path.isdir(ENGINES):
            avail = synth.available_voices(ENGINES, None, "train")
            for e, vs in avail.items():
                if e != "espeak":
                    self.assertFalse({(e, v) for v in vs} & held, e)

    def test_channel(self):
        import numpy as np
        x = np.sin(np.arange(16000) * 0.05).astype(np.float32) * 0.5
        s = self.specs(7)
        s = next(t for t in s if "rir" in t["aug"] and "noise" in t["aug"])
        y1, y2 = synth.apply_channel(x, s), synth.apply_channel(x, s)
        np.testing.assert_array_equal(y1, y2)                         # seeded: the same audio each time
        self.assertEqual(len(y1), 16000 + int(s["pad"][0] * 16000) + int(s["pad"][1] * 16000))
        self.assertAlmostEqual(20 * np.log10(np.abs(y1).max()), s["aug"]["level"], places=3)
        colour, snr, seed = s["aug"]["noise"]
        n = synth.coloured_noise(np.random.default_rng(1), 32000, "pink")
        self.assertAlmostEqual(float(np.sqrt(np.mean(n * n))), 1.0, places=4)
        spec = np.abs(np.fft.rfft(n)) ** 2                         # pink: more power low than high
        self.assertGreater(spec[10:200].mean(), 10 * spec[8000:16000].mean())


ENGINES = os.path.join(ROOT, ".corpus", "tts-root")


@unittest.skipUnless(os.path.isdir(ENGINES), "no engine root (models/corpus/build_engines.sh) here")
class TestSynthRun(unittest.TestCase):
    def run_synth(self, out, chunk):
        sent = os.path.join(out, "s.txt")
        with open(sent, "w") as f:
            f.write("they entered into the land of canaan\nfor your work shall be rewarded\n")
        subprocess.run([sys.executable, "-m", "rnntd_corpus.synth", "--engines", ENGINES,
                        "--sentences", sent, "--out", os.path.join(out, "a"), "--seed", "11", "--count", "6",
                        "--jobs", "2", "--chunk", str(chunk)], check=True, capture_output=True)
        recs = [json.loads(x) for x in open(os.path.join(out, "a", "manifest.jsonl"))]
        blobs = [open(os.path.join(out, "a", r["path"]), "rb").read() for r in recs]
        return recs, blobs

    def test_wavs_deterministic(self):
        r1, b1 = self.run_synth(tempfile.mkdtemp(), 6)
        r2, b2 = self.run_synth(tempfile.mkdtemp(), 2)
        self.assertEqual(len(r1), 6)
        self.assertEqual(r1, r2)
        self.assertEqual(b1, b2)
        for r in r1:
            self.assertGreater(r["duration"], 0.5)


if __name__ == "__main__":
    unittest.main()
