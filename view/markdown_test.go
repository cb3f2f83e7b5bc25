package view

import (
	"strings"
	"testing"
)

func TestRenderMarkdown(t *testing.T) {
	for _, c := range []struct {
		name, md, dir, want string
	}{
		{"heading", "# Run a\n## Settings", "", "<h1>Run a</h1>\n<h2>Settings</h2>\n"},
		{"paragraph", "one\ntwo\n\nthree", "", "<p>one\ntwo</p>\n<p>three</p>\n"},
		{"escaped", "<script>alert(1)</script> & \"q\"", "", "<p>&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#34;q&#34;</p>\n"},
		{"bold and code", "**Interrupted at update 3.** run `hilbert -resume <x>`", "",
			"<p><strong>Interrupted at update 3.</strong> run <code>hilbert -resume &lt;x&gt;</code></p>\n"},
		{"unclosed marks", "a ** b ` c * d [e", "", "<p>a ** b ` c * d [e</p>\n"},
		{"table", "| setting | value |\n|---|---|\n| model | d 64 |\n| seeds | model 0, data order 0 |", "",
			"<table>\n<tr><th>setting</th><th>value</th></tr>\n<tr><td>model</td><td>d 64</td></tr>\n<tr><td>seeds</td><td>model 0, data order 0</td></tr>\n</table>\n"},
		{"table without a header", "| a | b |", "", "<table>\n<tr><td>a</td><td>b</td></tr>\n</table>\n"},
		{"list with a continuation", "- **Loss** is\n  the mean\n- D", "", "<ul>\n<li><strong>Loss</strong> is the mean</li>\n<li>D</li>\n</ul>\n"},
		{"quote", "> **A short run.** 4,096 tokens", "", "<blockquote>\n<p><strong>A short run.</strong> 4,096 tokens</p>\n</blockquote>\n"},
		{"image of the run", "![loss](loss.png)", "cmp/adamw-seed0", `<p><img src="/files/cmp/adamw-seed0/loss.png" alt="loss"></p>` + "\n"},
		{"image name escaped", "![a](my plot.png)", "r", `<p><img src="/files/r/my%20plot.png" alt="a"></p>` + "\n"},
		{"image of the runs folder", "![v](compare_val_loss.png)", "", `<p><img src="/files/compare_val_loss.png" alt="v"></p>` + "\n"},
		{"image out of the folder", "![up](../x.png)", "a", "<p>up</p>\n"},
		{"image out of the runs folder", "![up](../x.png)", "", "<p>up</p>\n"},
		{"absolute image", "![abs](/etc/x.png)", "a", "<p>abs</p>\n"},
		{"remote image", "![remote](http://example.com/x.png)", "a", "<p>remote</p>\n"},
		{"not a PNG", `![svg](x.svg" onerror="alert(1))`, "a", "<p>svg)</p>\n"},
		{"link is its text", "see [the paper](https://arxiv.org/abs/1)", "", "<p>see the paper</p>\n"},
		{"hash without a space", "#5 is text", "", "<p>#5 is text</p>\n"},
	} {
		if got := RenderMarkdown(c.md, c.dir); got != c.want {
			t.Errorf("%s: RenderMarkdown(%q, %q) =\n%q\nwant\n%q", c.name, c.md, c.dir, got, c.want)
		}
	}
}

// What train's summary.md holds renders without any of its Markdown left
// as text.
func TestRenderSummary(t *testing.T) {
	md := "# Run a\n\nA decoder-only transformer (6,498,432 parameters).\n\n## Settings\n\n| setting | value |\n|---|---|\n| head optimizer | RowNorm (the paper's method) |\n\n" +
		"> **A short run.** compare it (`hilbert compare` trains both heads)\n\n## What the numbers mean\n\n- **Loss** is the mean cross-entropy.\n- `metrics.jsonl` holds one JSON line per logged update.\n\n![loss](loss.png)\n\n![Hilbert RMS](hilbert_rms.png)\n"
	got := RenderMarkdown(md, "a")
	for _, left := range []string{"**", "`", "|", "![", "\n## ", "\n> ", "\n- "} {
		if strings.Contains(got, left) {
			t.Errorf("%q left as text in\n%s", left, got)
		}
	}
	if n := strings.Count(got, "<img "); n != 2 {
		t.Errorf("%d images, want 2:\n%s", n, got)
	}
}
