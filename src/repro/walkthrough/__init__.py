"""One module per notebook: each function is what one notebook cell calls."""
