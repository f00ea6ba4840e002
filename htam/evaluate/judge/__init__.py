"""Trusted code of the judge child: it holds the reference, draws every input, drives the two isolated runners, compares every output and times them."""
