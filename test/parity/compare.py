"""What the parity scripts call agreement: relative differences within TOLERANCE (an absolute floor of
1e-3 keeps values near zero from dominating)."""
import numpy as np

TOLERANCE = 1e-5


def close(name, a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        print(f"{name}: shapes differ {a.shape} vs {b.shape}")
        return False
    worst = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-3))) if a.size else 0.0
    print(f"{name}: {a.size} values, worst relative difference {worst:.2e}")
    return worst <= TOLERANCE
