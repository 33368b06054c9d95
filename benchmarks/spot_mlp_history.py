"""Issue 12 item 6: does DPMLPClassifier's float32 step time depend on what ran before?

Fits the MLP on float32 in a fresh interpreter, then (with ``mix``) a tiny float64 fit, then the
float32 fit again, and prints the training-loop time per step (``train_seconds_``, not the
calibration).  Run both ``python benchmarks/spot_mlp_history.py mix`` and without ``mix``, each in
a fresh process.
"""
import time, sys, numpy as np
from dpfast.sgd import DPMLPClassifier
g = np.random.default_rng(0)
n=30000
X = g.standard_normal((n, 784)).astype(np.float32); X /= np.linalg.norm(X, axis=1, keepdims=True)
y = g.integers(0, 10, n)
def run(Xa, label):
    m = DPMLPClassifier(hidden=256, epsilon=1.0, delta=1e-5, epochs=1, batch_size=256, max_norm=1.0,
                        classes=list(range(10)), random_state=0, n_threads=1)
    m.fit(Xa, y)
    steps = m.n_steps_ if hasattr(m, "n_steps_") else None
    print(label, f"train {m.train_seconds_:.3f}s", steps, f"{1000*m.train_seconds_/ (n/256):.2f} ms/step", flush=True)
run(X, "f32 fresh")
if sys.argv[1:] == ["mix"]:
    m = DPMLPClassifier(hidden=8, epsilon=1.0, delta=1e-5, epochs=1, batch_size=32, classes=list(range(10)), random_state=0)
    m.fit(X[:200].astype(np.float64), y[:200])
    print("did f64")
run(X, "f32 again")
