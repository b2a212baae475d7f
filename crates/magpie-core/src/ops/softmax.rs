//! `softmax`, `log_softmax` and their relatives over one dim.
