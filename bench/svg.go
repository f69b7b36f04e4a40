package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// WriteSVG draws one horizontal bar per compared result (every result
// that is not a baseline and has a ratio), scaled so 1.0 — the baseline —
// is a marked line. Hand-written SVG: no chart library for one picture.
func WriteSVG(w io.Writer, r *Report, title string) error {
	var bars []Result
	maxRatio := 1.0
	for _, res := range r.Results {
		if res.Baseline || res.Ratio <= 0 {
			continue
		}
		bars = append(bars, res)
		maxRatio = math.Max(maxRatio, res.Ratio)
	}
	const (
		labelW = 330
		plotW  = 420
		rowH   = 22
		top    = 48
		bottom = 30
	)
	scale := float64(plotW) / (maxRatio * 1.1)
	height := top + len(bars)*rowH + bottom
	width := labelW + plotW + 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="38" fill="#555">speed relative to the baseline of each metric (1.0 = baseline, higher is better)</text>`+"\n")
	for i, res := range bars {
		y := top + i*rowH
		barW := res.Ratio * scale
		color := "#4c78a8"
		if res.Ratio < 1 {
			color = "#e45756"
		}
		label := fmt.Sprintf("%s: %s, %s", res.Section, res.Metric, res.Variant)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-6, y+15, html.EscapeString(label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, y+3, barW, rowH-6, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.2fx</text>`+"\n", float64(labelW)+barW+4, y+15, res.Ratio)
	}
	one := float64(labelW) + scale
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-dasharray="4 3"/>`+"\n", one, top-4, one, top+len(bars)*rowH+4)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">1.0</text>`+"\n", one, top+len(bars)*rowH+18)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
