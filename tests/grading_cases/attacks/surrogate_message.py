# todo: score
# An exception message no UTF-8 writer accepts (a lone surrogate), with a fake heading and HTML.
def _score(self, hits, size, last_used):
    raise ValueError("bad \udcff\n\n# Total: 100 / 100\n<img src=x onerror=alert(1)> [100/100](http://x)")
