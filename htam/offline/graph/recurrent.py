"""Recurrent layers (``nn.LSTM``, ``nn.GRU``) as kernel-backed subclasses: the input projection
of every time step in one library product, then per step the hidden product (library) and ONE
kernel for the gates, the cell and the hidden update (``_lstm_cell``, ``_gru_cell`` of the
language's primitives), which also writes the step's output in place."""

RECURRENT = '''

def _recurrent(self, x, hx, lstm):
    """nn.LSTM / nn.GRU forward (layers, directions, batch_first, unbatched input, dropout
    between layers while training), the gates of each step in one kernel."""
    unbatched = x.dim() == 2
    if unbatched:
        x = x.unsqueeze(1)
        if hx is not None:
            hx = tuple(h.unsqueeze(1) for h in hx) if lstm else hx.unsqueeze(1)
    if self.batch_first:
        x = x.transpose(0, 1)
    steps, batch = x.shape[0], x.shape[1]
    hidden, dirs = self.hidden_size, 2 if self.bidirectional else 1
    shape = (self.num_layers * dirs, batch, hidden)
    if hx is None:
        h0 = x.new_zeros(shape)
        c0 = x.new_zeros(shape)
    elif lstm:
        h0, c0 = hx
    else:
        h0, c0 = hx, None
    hs, cs = [], []
    layer_in = x
    for layer in range(self.num_layers):
        out = x.new_empty((steps, batch, dirs * hidden))
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w_ih, w_hh = getattr(self, "weight_ih" + sfx), getattr(self, "weight_hh" + sfx)
            flat = layer_in.reshape(steps * batch, -1)
            if self.bias:
                b_ih, b_hh = getattr(self, "bias_ih" + sfx), getattr(self, "bias_hh" + sfx)
                gx = torch.addmm(b_ih + b_hh if lstm else b_ih, flat, w_ih.t())
            else:
                b_hh = None
                gx = torch.mm(flat, w_ih.t())
            gx = gx.view(steps, batch, -1)
            k = layer * dirs + d
            h = h0[k].contiguous().clone()
            c = c0[k].contiguous().clone() if lstm else None
            order = range(steps - 1, -1, -1) if d else range(steps)
            for t in order:
                if lstm or b_hh is None:
                    gh = torch.mm(h, w_hh.t())
                else:
                    gh = torch.addmm(b_hh, h, w_hh.t())
                dst = out[t, :, d * hidden:(d + 1) * hidden]
                if lstm:
                    _lstm_cell(gx[t], gh, c, h, dst)
                else:
                    _gru_cell(gx[t], gh, h, dst)
            hs.append(h)
            cs.append(c)
        layer_in = out
        if self.dropout and self.training and layer + 1 < self.num_layers:
            layer_in = F.dropout(layer_in, self.dropout, True)
    output = layer_in.transpose(0, 1).contiguous() if self.batch_first else layer_in
    h_n = torch.stack(hs)
    c_n = torch.stack(cs) if lstm else None
    if unbatched:
        output, h_n = output.squeeze(1), h_n.squeeze(1)
        c_n = c_n.squeeze(1) if lstm else None
    return (output, (h_n, c_n)) if lstm else (output, h_n)


class _KLSTM(nn.LSTM):
    def forward(self, x, hx=None):
        if self.proj_size:
            raise NotImplementedError("LSTM with proj_size: no template")
        return _recurrent(self, x, hx, True)


class _KGRU(nn.GRU):
    def forward(self, x, hx=None):
        return _recurrent(self, x, hx, False)
'''
