import pytest
import tensorflow as tf

#: Grappler passes that re-associate floating-point sums and products
#: depending on the graph's shape (which kswap's copies change).
REASSOCIATING = ("arithmetic_optimization", "constant_folding")


@pytest.fixture
def no_reassociation():
    """Turns off Grappler's re-associating passes for the test.

    With them on, the plain model's graph and kswap's may round differently in
    the last bit (the same math, summed in another order); with them off both
    compute in TensorFlow's order and must agree bit for bit.
    """
    before = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({k: False for k in REASSOCIATING})
    yield
    tf.config.optimizer.set_experimental_options({k: before.get(k, True) for k in REASSOCIATING})
