//! Random ops with a seedable `Generator`: `rand`, `randn`, `randint`, `randperm`, `normal`, `bernoulli`, `multinomial`.
