//! Python-style indexing (`tensor[...]`): ints, slices, None, ellipsis, bool masks, integer tensors; and `index_put_`.
