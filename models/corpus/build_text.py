#!/usr/bin/env python3
"""Build the normalised sentence lists of the synthetic corpus from unpacked Debian packages.

Input: SRC, the folder fetch_debs.sh unpacked the text packages into (SRC/usr/...).
Output in OUT:
  train.txt dev.txt test.txt   one sentence a line, alphabet a-z ' and space, split by sentence hash
  harvard.txt                  the 720 Harvard sentences (r-cran-stringr), evaluation only
  sources.tsv                  sentence <TAB> source package, for the model card's statistics
The Harvard sentences are removed from every split, so no model trained on train.txt has seen them.
Deterministic: same packages in, same files out.  Python stdlib only.
"""
import argparse
import gzip
import hashlib
import os
import re
import struct
import subprocess
import sys
import unicodedata
import zlib

MIN_WORDS, MAX_WORDS = 3, 24
ABBREV = [(r"\bMr\.", "Mister"), (r"\bMrs\.", "Missus"), (r"\bDr\.", "Doctor"), (r"\bSt\.", "Saint"),
          (r"\bMessrs\.", "Messieurs"), (r"\bi\.e\.", "that is"), (r"\be\.g\.", "for example"),
          (r"\betc\.", "et cetera"), (r"\bvs\.", "versus"), (r"&", " and ")]
ASCII_MAP = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": " - ", "\u2013": " - ",
             "\u00e6": "ae", "\u0153": "oe", "\u00c6": "Ae", "\u0152": "Oe", "\u00df": "ss"}
ROMAN = re.compile(r"^(?=[MDCLXVI])M*(C[MD]|D?C{0,3})(X[CL]|L?X{0,3})(I[XV]|V?I{0,3})$")


def to_ascii(s):
    s = "".join(ASCII_MAP.get(c, c) for c in s)
    s = unicodedata.normalize("NFKD", s)
    return "".join(c for c in s if ord(c) < 128 and not unicodedata.combining(c))


def split_sentences(text):
    """Cut running text into sentences at . ! ? (also ; and : which end clauses TTS reads as pauses)."""
    text = re.sub(r"\s+", " ", text)
    for a, b in ABBREV:
        text = re.sub(a, b, text)
    return [p.strip() for p in re.split(r"(?<=[.!?;:])\s+", text) if p.strip()]


def normalise(sent):
    """Return the sentence in the 28-symbol alphabet, or None when it cannot be read unambiguously."""
    s = to_ascii(sent)
    for a, b in ABBREV:
        s = re.sub(a, b, s)
    s = re.sub(r"\[[^\]]*\]|\{|\}|_", " ", s)            # editorial brackets, markup leftovers
    if re.search(r"[0-9#$%*+<=>@\\^|~/]", s):
        return None                                      # numbers and symbols are read inconsistently
    words = re.findall(r"[A-Za-z']+", s)
    for w in words:
        core = w.strip("'")
        if len(core) >= 2 and core.isupper() and core not in ("OK",):
            return None                                  # acronyms get spelled out by some engines
        if len(core) >= 2 and ROMAN.match(core):
            return None
    s = s.replace("-", " ")
    s = re.sub(r"[^A-Za-z' ]", " ", s).lower()
    s = re.sub(r"(?<![a-z])'|'(?![a-z])", " ", s)         # apostrophes only inside words
    s = re.sub(r" +", " ", s).strip()
    n = len(s.split())
    if n < MIN_WORDS or n > MAX_WORDS:
        return None
    return s


# ---------------------------------------------------------------- sources
def src_kjv(root):
    exe = os.path.join(root, "usr/bin/bible")
    out = subprocess.run([exe, "-l100000", "-p", os.path.join(root, "usr/lib"), "gen1:1-rev22:21"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"^\s*\d+\s+(.*)$", line)
        if m:
            yield from split_sentences(m.group(1))


def src_web(root):
    d = os.path.join(root, "usr/share/sword/modules/texts/ztext/engWEB2015eb")
    for part in ("ot", "nt"):
        idx = open(os.path.join(d, part + ".bzs"), "rb").read()
        data = open(os.path.join(d, part + ".bzz"), "rb").read()
        for k in range(len(idx) // 12):
            off, size, _ = struct.unpack_from("<III", idx, 12 * k)
            block = zlib.decompress(data[off:off + size]).decode("utf-8", "replace")
            block = re.sub(r"<note\b.*?</note>", " ", block, flags=re.S)   # footnotes with their text
            block = re.sub(r"<title\b.*?</title>", " ", block, flags=re.S)  # section headings
            block = re.sub(r"<[^>]*>", " ", block)
            yield from split_sentences(block)


def src_fortunes(root):
    d = os.path.join(root, "usr/share/games/fortunes")
    for name in sorted(os.listdir(d)):
        if name.endswith((".dat", ".u8")) or name in ("ascii-art", "translate-me") or os.path.islink(os.path.join(d, name)):
            continue
        text = open(os.path.join(d, name), "rb").read().decode("utf-8", "replace")
        for cookie in text.split("\n%\n"):
            body = re.sub(r"\n\s*--.*$", "", cookie.strip(), flags=re.S)   # attribution lines
            yield from split_sentences(body)


def src_wordnet(root):
    d = os.path.join(root, "usr/share/wordnet")
    for pos in ("noun", "verb", "adj", "adv"):
        for line in open(os.path.join(d, "data." + pos), encoding="latin-1"):
            if line.startswith("  ") or "|" not in line:
                continue
            gloss = line.split("|", 1)[1]
            for q in re.findall(r'"([^"]+)"', gloss):        # usage examples, full sentences mostly
                yield from split_sentences(q)


def src_gcide(root):
    text = gzip.open(os.path.join(root, "usr/share/dictd/gcide.dict.dz"), "rt", encoding="utf-8",
                     errors="replace").read()
    # Quotations are blocks indented by 10+ spaces, optionally ending with "--Author."
    block = []
    for line in text.split("\n"):
        if re.match(r"^ {10,}\S", line) and not line.strip().startswith("["):
            block.append(line.strip())
            continue
        if block:
            q = " ".join(block)
            q = re.sub(r"--\s*[A-Z][^.]*\.?(\s*[A-Z][^.]*\.)*\s*$", "", q).strip()
            q = re.sub(r"--.*$", "", q)
            yield from split_sentences(q)
            block = []


def src_dictd_prose(root, name):
    text = gzip.open(os.path.join(root, "usr/share/dictd", name + ".dict.dz"), "rt", encoding="utf-8",
                     errors="replace").read()
    for para in re.split(r"\n\s*\n", text):
        para = re.sub(r"^[A-Z' -]+, [a-z.]+\s", "", para.strip())   # "HEADWORD, n." of the Devil's
        yield from split_sentences(para)


def read_r_strings(rdb, rdx, var):
    """The character vector `var` of an R lazy-load database (XDR serialisation, zlib blocks)."""
    idx = gzip.decompress(open(rdx, "rb").read())
    names = re.findall(rb"\x00\x04\x00\x09\x00\x00\x00(.)([a-z_A-Z0-9.]+)", idx)
    # The index is list(variables = list(name = c(off, len), ...)): offsets are INTSXP pairs in order.
    pairs = [struct.unpack(">II", m) for m in re.findall(rb"\x00\x00\x00\x0d\x00\x00\x00\x02(.{8})", idx, re.S)]
    order = [n.decode() for _, n in names if n != b"names"]
    k = order.index(var)
    off, ln = pairs[k]
    blob = open(rdb, "rb").read()[off:off + ln]
    x = zlib.decompress(blob[4:])
    p = x.index(b"UTF-8") + 5
    typ, n = struct.unpack_from(">II", x, p)
    assert typ & 0xFF == 16, "not a character vector"
    p += 8
    out = []
    for _ in range(n):
        _flags, ln = struct.unpack_from(">Ii", x, p)
        p += 8
        out.append(x[p:p + ln].decode("utf-8"))
        p += ln
    return out


SOURCES = [("bible-kjv-text", src_kjv), ("sword-text-web", src_web), ("fortunes", src_fortunes),
           ("wordnet-base", src_wordnet), ("dict-gcide", src_gcide),
           ("dict-devil", lambda r: src_dictd_prose(r, "devil")),
           ("dict-jargon", lambda r: src_dictd_prose(r, "jargon"))]


def split_of(sentence, dev_per_mille, test_per_mille):
    h = int(hashlib.sha1(sentence.encode()).hexdigest()[:8], 16) % 1000
    if h < test_per_mille:
        return "test"
    if h < test_per_mille + dev_per_mille:
        return "dev"
    return "train"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="folder with the unpacked text packages")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dev-per-mille", type=int, default=5)
    ap.add_argument("--test-per-mille", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    sl = os.path.join(a.src, "usr/lib/R/site-library/stringr/data")
    harvard = [normalise(s) or "" for s in read_r_strings(os.path.join(sl, "Rdata.rdb"),
                                                          os.path.join(sl, "Rdata.rdx"), "sentences")]
    harvard = [h for h in harvard if h]
    if len(harvard) < 700:
        sys.exit("build_text.py: expected 720 Harvard sentences, got %d" % len(harvard))
    hset = set(harvard)
    seen, splits, stats = {}, {"train": [], "dev": [], "test": []}, {}
    for pkg, fn in SOURCES:
        raw = kept = 0
        for sent in fn(a.src):
            raw += 1
            s = normalise(sent)
            if not s or s in seen or s in hset:
                continue
            seen[s] = pkg
            kept += 1
            splits[split_of(s, a.dev_per_mille, a.test_per_mille)].append(s)
        stats[pkg] = (raw, kept)
        print("%-16s %7d raw %7d kept" % (pkg, raw, kept), file=sys.stderr)
    for name, lines in splits.items():
        with open(os.path.join(a.out, name + ".txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "harvard.txt"), "w") as f:
        f.write("\n".join(harvard) + "\n")
    with open(os.path.join(a.out, "sources.tsv"), "w") as f:
        for s, pkg in seen.items():
            f.write("%s\t%s\n" % (s, pkg))
    words = sum(len(s.split()) for s in seen)
    print("total %d sentences, %d words, %d distinct words; train %d dev %d test %d harvard %d" % (
        len(seen), words, len({w for s in seen for w in s.split()}), len(splits["train"]),
        len(splits["dev"]), len(splits["test"]), len(harvard)), file=sys.stderr)


if __name__ == "__main__":
    main()
