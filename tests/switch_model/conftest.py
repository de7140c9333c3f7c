import sys
from pathlib import Path

# The model is its own package under switch-model/ (it runs in switch guests).
MODEL_DIR = Path(__file__).resolve().parents[2] / "switch-model"
sys.path.insert(0, str(MODEL_DIR))
