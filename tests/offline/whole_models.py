"""Whole models for the ``model`` family's tests (htam.offline.graph): small, each holding
segments the single-kernel families do not cover."""

from tests.offline.sources import kb

CONV_BN_NET = kb(
    """
class Block(nn.Module):
    expansion = 1

    def __init__(self, cin, cout):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1),
            nn.ReLU6(inplace=True),
        )
        self.bn = nn.BatchNorm2d(cout * self.expansion, eps=1e-3, momentum=0.2)

    def forward(self, x):
        return F.relu(self.bn(self.body(x)))


class Model(nn.Module):
    def __init__(self, cin, cout, classes):
        super().__init__()
        self.block = Block(cin, cout)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cout, classes)
        self.head = nn.Linear(classes, 2)
        self.scale = 0.5

    def forward(self, x):
        x = self.pool(self.block(x))
        x = torch.flatten(x, 1)
        return self.head(F.relu(self.fc(x)) * self.scale)
""",
    "[torch.randn(3, 4, 9, 7) * 2 + 1]",
    "[4, 6, 5]",
)

ATTENTION_BLOCK = kb(
    """
class Model(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(c // self.heads), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.mlp(x)
""".replace("class Model", "import math\n\nclass Model", 1),
    "[torch.randn(2, 5, 12)]",
    "[12, 3]",
)

RECURRENT = kb(
    """
class Model(nn.Module):
    def __init__(self, size, hidden, layers):
        super().__init__()
        self.lstm = nn.LSTM(size, hidden, layers, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(2 * hidden, hidden, 1)
        self.fc = nn.Linear(hidden, 3)

    def forward(self, x, h0, c0):
        out, (hn, cn) = self.lstm(x, (h0, c0))
        out, h = self.gru(out.transpose(0, 1))
        return self.fc(out[-1]) + cn.sum() + h.sum()
""",
    "[torch.randn(2, 4, 3), torch.randn(4, 2, 5), torch.randn(4, 2, 5)]",
    "[3, 5, 2]",
)

CONV_ONLY = kb(
    """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return torch.cat([self.pool(self.conv(x)), self.pool(self.conv(x))], 1)
""",
    "[torch.randn(2, 3, 8, 8)]",
)

MODELS = {"conv_bn_net": CONV_BN_NET, "attention_block": ATTENTION_BLOCK, "recurrent": RECURRENT}
