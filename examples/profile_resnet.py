"""Profile a keras.applications model and look at its memory in TensorBoard.

python examples/profile_resnet.py
tensorboard --logdir logs/resnet50
"""

import keras
import numpy as np

import kswap  # first: selects TensorFlow's CPU BFC allocator on machines without a GPU

model = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
model.compile("adam", "sparse_categorical_crossentropy")
rng = np.random.default_rng(0)
x = rng.random((32, 64, 64, 3), dtype=np.float32)
y = rng.integers(0, 10, 32)

trace = kswap.profile(model, x, y, steps=2, batch_size=16, logdir="logs/resnet50")
label = " (emulated on CPU:0)" if trace.emulated else ""
print(f"device peak: {trace.peak_bytes('device') / 2**20:.1f} MiB{label}")
print(f"step peak:   {trace.step_peak_bytes('device') / 2**20:.1f} MiB")
for layer, size in list(trace.by_layer().items())[:10]:
    print(f"  {layer:<28} {size / 2**20:8.1f} MiB")
trace.to_json("logs/resnet50/trace.json")
