"""Two small models written with Relax's nn frontend, guarded by this repository's perfguard.toml.

Each function returns what `nn.Module.export_tvm` gives, (IRModule, params); perfguard binds the
weights and extracts every fused kernel.
"""

from tvm.relax.frontend import nn


class MLP(nn.Module):
    def __init__(self, features: int, hidden: int, classes: int):
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(nn.relu(self.fc1(x)))


class ConvBlock(nn.Module):
    """conv 3x3 + ReLU, twice, then a 1x1 projection: a small residual-free CNN stem."""

    def __init__(self, channels: int, width: int):
        self.conv1 = nn.Conv2D(channels, width, 3, padding=1, bias=True)
        self.conv2 = nn.Conv2D(width, width, 3, padding=1, bias=True)
        self.proj = nn.Conv2D(width, channels, 1, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = nn.relu(self.conv1(x))
        y = nn.relu(self.conv2(y))
        return self.proj(y)


def mlp(batch: int = 4, features: int = 64, hidden: int = 128, classes: int = 10):
    spec = {"forward": {"x": nn.spec.Tensor((batch, features), "float32")}}
    return MLP(features, hidden, classes).export_tvm(spec=spec)


def conv_block(batch: int = 1, channels: int = 8, width: int = 16, size: int = 16):
    spec = {"forward": {"x": nn.spec.Tensor((batch, channels, size, size), "float32")}}
    return ConvBlock(channels, width).export_tvm(spec=spec)
