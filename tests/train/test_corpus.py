"""Corpus scripts: text normalisation, the split, synthesis specs; synthesis itself when the engines exist."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "models", "corpus"))
sys.path.insert(0, os.path.join(ROOT, "models", "train"))
import build_text  # noqa: E402
import synth  # noqa: E402
from data import decode_ids, encode_text, error_rates  # noqa: E402


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
        s = "the birch canoe slid on the smooth planks"
        self.assertEqual(build_text.split_of(s, 5, 5), build_text.split_of(s, 5, 5))
        got = {build_text.split_of("sentence number %d" % i, 5, 5) for i in range(3000)}
        self.assertEqual(got, {"train", "dev", "test"})

    def test_tokens_roundtrip(self):
        ids = encode_text("it's a test")
        self.assertEqual(ids[:4], [10, 21, 1, 20])
        self.assertEqual(decode_ids(ids), "it's a test")
        self.assertEqual(error_rates([("a b c", "a x c")])[:2], (1 / 3, 1 / 5))


class TestSynthSpecs(unittest.TestCase):
    def test_specs_deterministic_and_mixed(self):
        a = [synth.utterance_spec(3, i, "hello there", 0.5) for i in range(400)]
        b = [synth.utterance_spec(3, i, "hello there", 0.5) for i in range(400)]
        self.assertEqual(a, b)
        c = [synth.utterance_spec(4, i, "hello there", 0.5) for i in range(400)]
        self.assertNotEqual(a, c)
        engines = {s["engine"] for s in a}
        self.assertEqual(engines, {"espeak", "flite", "festival"})
        share = sum(1 for s in a if s["aug"]) / len(a)
        self.assertTrue(0.4 < share < 0.6, share)
        for s in a:
            fx = synth.sox_effects(s)
            self.assertEqual(fx[:2], ["norm", "-3"])
            self.assertIn("16000", fx)


ENGINES = os.path.join(ROOT, ".corpus", "tts-root")


@unittest.skipUnless(os.path.isdir(ENGINES), "no engine root (models/corpus/build_engines.sh) here")
class TestSynthRun(unittest.TestCase):
    def run_synth(self, out, chunk):
        sent = os.path.join(out, "s.txt")
        with open(sent, "w") as f:
            f.write("the birch canoe slid on the smooth planks\nglue the sheet to the dark blue background\n")
        subprocess.run([sys.executable, os.path.join(ROOT, "models", "corpus", "synth.py"), "--engines", ENGINES,
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
