//! `pad` in all modes (constant, reflect, replicate, circular).
