import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVAL_DIR = REPO.parent / "shared" / "eval"
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")
