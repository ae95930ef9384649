import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")
# torch threads spin-wait while any other process is busy, 3–5× slower on 2 cores; must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
