"""The OpenAPI spec made concrete for one running daemon (run by test_schema.py with the schemathesis
venv's Python, which has PyYAML).

  schema_spec.py SPEC OUT FEATURE_DIM MIN_FRAMES MAX_FRAMES
      writes SPEC with the frame width and the frame limits of the running daemon (/health, and
      whether it takes zero frames) as schema bounds, so schemathesis generates frames of the right
      width and checks the limits' edges
  schema_spec.py SPEC --example                     prints the JSON request body example
The published spec states these bounds in words only: they belong to the model and the
configuration, not to the API."""
import json
import sys

import yaml


def main(argv):
    with open(argv[1]) as f:
        spec = yaml.safe_load(f)
    post = spec["paths"]["/v1/transcribe"]["post"]
    if argv[2] == "--example":
        print(json.dumps(post["requestBody"]["content"]["application/json"]["example"]))
        return 0
    out, dim, min_frames, max_frames = argv[2], int(argv[3]), int(argv[4]), int(argv[5])
    feats = spec["components"]["schemas"]["TranscribeRequest"]["properties"]["features"]
    feats["minItems"] = max(min_frames, feats.get("minItems", 0))
    feats["maxItems"] = max_frames
    feats["items"]["minItems"] = dim
    feats["items"]["maxItems"] = dim
    with open(out, "w") as f:
        yaml.safe_dump(spec, f, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
