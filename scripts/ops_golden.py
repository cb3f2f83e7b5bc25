"""Writes the PyTorch golden values for Hilbert's TopK, convolution, pooling,
attention and unary-op tests (autograd/ops_test.go).

Usage (from the repository root, with Debian's python3-torch):
    /usr/bin/python3 scripts/ops_golden.py autograd/testdata/ops_golden.json

Every case draws its inputs from a fixed seed in float64, so the values and
gradients are PyTorch's float64 results. The inputs are continuous random
numbers, so TopK and max pooling meet no ties. Gradients are those of
sum(out * r) for the random r stored with the case. Tensors are stored as
{"shape": [...], "data": [flat row-major values]}.
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(23)


def t(x):
    return {"shape": list(x.shape), "data": [float(v) for v in x.detach().reshape(-1).tolist()]}


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def topk_cases():
    out = []
    for name, shape, dim, k, largest in [
        ("rows largest", (3, 7), 1, 3, True),
        ("rows smallest", (3, 7), -1, 4, False),
        ("axis 0", (5, 4), 0, 2, True),
        ("middle axis", (2, 6, 3), 1, 6, False),
    ]:
        x = rand(*shape)
        v, i = torch.topk(x, k, dim=dim, largest=largest, sorted=True)
        out.append({"name": name, "x": t(x), "dim": dim, "k": k, "largest": largest,
                    "values": t(v), "indices": [int(j) for j in i.reshape(-1).tolist()]})
    return out


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def conv_cases():
    out = []
    for name, xs, ws, bias, stride, padding, dilation, groups in [
        ("conv1d", (2, 3, 9), (4, 3, 3), True, [2], [1], [2], 1),
        ("conv2d plain", (2, 3, 6, 5), (4, 3, 3, 3), True, [1], [0], [1], 1),
        ("conv2d strided grouped", (2, 4, 7, 6), (6, 2, 3, 2), True, [2, 1], [1, 2], [1, 2], 2),
        ("conv2d depthwise no bias", (1, 3, 5, 5), (3, 1, 2, 2), False, [1], [1], [1], 3),
        ("conv3d", (1, 2, 4, 5, 4), (3, 2, 2, 3, 2), True, [1, 2, 1], [1, 0, 1], [1], 1),
    ]:
        spatial = len(xs) - 2
        x, w = rand(*xs).requires_grad_(), rand(*ws).requires_grad_()
        b = rand(ws[0]).requires_grad_() if bias else None
        y = CONV[spatial](x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
        r = rand(*y.shape)
        (y * r).sum().backward()
        case = {"name": name, "spatial": spatial, "x": t(x), "w": t(w), "stride": stride, "padding": padding,
                "dilation": dilation, "groups": groups, "r": t(r), "out": t(y), "dx": t(x.grad), "dw": t(w.grad)}
        if bias:
            case["b"], case["db"] = t(b), t(b.grad)
        out.append(case)
    return out


def pool_cases():
    out = []
    for name, kind, xs, kernel, stride, padding, dilation in [
        ("max_pool1d", "max", (2, 3, 10), [3], [2], [1], [1]),
        ("max_pool2d", "max", (2, 3, 7, 6), [3, 2], [2, 2], [1, 1], [1, 1]),
        ("max_pool2d dilated", "max", (1, 2, 8, 7), [2, 3], [1, 2], [0, 1], [2, 1]),
        ("avg_pool1d", "avg", (2, 3, 10), [4], [3], [2], [1]),
        ("avg_pool2d", "avg", (2, 3, 7, 6), [3, 3], [2, 1], [1, 1], [1, 1]),
    ]:
        x = rand(*xs).requires_grad_()
        if kind == "max":
            f = F.max_pool1d if len(xs) == 3 else F.max_pool2d
            y = f(x, kernel, stride=stride, padding=padding, dilation=dilation)
        else:
            f = F.avg_pool1d if len(xs) == 3 else F.avg_pool2d
            y = f(x, kernel, stride=stride, padding=padding)
        r = rand(*y.shape)
        (y * r).sum().backward()
        out.append({"name": name, "kind": kind, "spatial": len(xs) - 2, "x": t(x), "kernel": kernel,
                    "stride": stride, "padding": padding, "dilation": dilation, "r": t(r),
                    "out": t(y), "dx": t(x.grad)})
    return out


def attention_cases():
    """Attention with keys of another length than the queries, by its
    formula (torch 1.13 has no scaled_dot_product_attention): q [B, Tq, H, D],
    k, v [B, Tk, H, D]; causal query t sees keys u <= t + Tk - Tq (the
    queries are the last Tq positions: prefix caching), unmasked every key.
    The scales are exact in float32, since Graph.Attention takes a float32."""
    out = []
    for name, b, tq, tk, h, d, scale, causal in [
        ("causal self", 1, 5, 5, 2, 3, 0.625, True),
        ("causal prefix", 2, 3, 7, 2, 4, 0.5, True),
        ("causal one new token", 1, 1, 6, 2, 4, 0.5, True),
        ("cross", 2, 4, 6, 2, 4, 0.5, False),
        ("cross fewer keys", 1, 5, 2, 1, 3, 0.75, False),
    ]:
        q = rand(b, tq, h, d).requires_grad_()
        k, v = rand(b, tk, h, d).requires_grad_(), rand(b, tk, h, d).requires_grad_()
        qh, kh, vh = q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
        s = qh @ kh.transpose(-1, -2) * scale
        if causal:
            keep = torch.ones(tq, tk, dtype=torch.bool).tril(diagonal=tk - tq)
            s = s.masked_fill(~keep, float("-inf"))
        y = (torch.softmax(s, dim=-1) @ vh).permute(0, 2, 1, 3)
        r = rand(*y.shape)
        (y * r).sum().backward()
        out.append({"name": name, "causal": causal, "scale": scale, "q": t(q), "k": t(k), "v": t(v), "r": t(r),
                    "out": t(y), "dq": t(q.grad), "dk": t(k.grad), "dv": t(v.grad)})
    return out


# Each device.UnaryOp by its name, as PyTorch computes it, and the inputs it
# takes: positive ones for the logarithms and roots, a wide range (within
# |x| < 20, where torch's softplus is not yet x itself) for softplus.
UNARY = {
    "neg": (torch.neg, 1), "abs": (torch.abs, 1), "exp": (torch.exp, 1), "log": (torch.log, 0),
    "sqrt": (torch.sqrt, 0), "rsqrt": (torch.rsqrt, 0), "reciprocal": (torch.reciprocal, 1),
    "tanh": (torch.tanh, 1), "erf": (torch.erf, 1), "sigmoid": (torch.sigmoid, 1), "relu": (torch.relu, 1),
    "sin": (torch.sin, 1), "cos": (torch.cos, 1), "square": (torch.square, 1), "sign": (torch.sign, 1),
    "log1p": (torch.log1p, 0), "expm1": (torch.expm1, 1), "softplus": (F.softplus, 6),
}


def unary_cases():
    """Every unary op and the gradient of sum(out * r), on 12 inputs: drawn
    N(0, s^2) for a scale s, or |N(0, 1)| + 0.1 for the positive domains."""
    out = []
    for name, (f, s) in UNARY.items():
        x = (rand(12) * s if s else rand(12).abs() + 0.1).requires_grad_()
        y = f(x)
        r = rand(12)
        (y * r).sum().backward()
        out.append({"name": name, "x": t(x), "r": t(r), "out": t(y), "dx": t(x.grad)})
    return out


def main():
    # attention_cases, then unary_cases, draw last, so adding them left the
    # other cases' values unchanged.
    golden = {"torch": torch.__version__, "topk": topk_cases(), "conv": conv_cases(), "pool": pool_cases(),
              "attention": attention_cases(), "unary": unary_cases()}
    with open(sys.argv[1], "w") as f:
        json.dump(golden, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
