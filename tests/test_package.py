import subprocess
import sys


def test_import_sets_cpu_bfc_unless_user_chose():
    code = "import os, kswap; print(os.environ['TF_CPU_ALLOCATOR_USE_BFC'])"
    env = {k: v for k, v in __import__("os").environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "true"
    env["TF_CPU_ALLOCATOR_USE_BFC"] = "false"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "false"


def test_missing_bfc_allocator_gives_instructions():
    code = (
        "import os\n"
        "os.environ['TF_CPU_ALLOCATOR_USE_BFC'] = 'false'\n"
        "import kswap, keras, numpy as np\n"
        "m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n"
        "m.compile('sgd', 'mse')\n"
        "kswap.profile(m, np.ones((8, 4)), np.ones((8, 2)), steps=1)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "TF_CPU_ALLOCATOR_USE_BFC=true" in proc.stderr
