package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// WriteSVG draws one horizontal bar per compared result (every result
// that is not a baseline and has a ratio), growing from the baseline line
// (1.0) to the right when faster and to the left when slower. The axis is
// logarithmic: ratios here run from 0.01x (9p stat walks) to 50x (the
// port-watch rewrite), and on a linear axis everything below 2x would be
// a sliver. Hand-written SVG: no chart library for one picture.
func WriteSVG(w io.Writer, r *Report, title string) error {
	var bars []Result
	lo, hi := -1.0, 1.0 // log10 of the axis ends: at least 0.1x..10x
	for _, res := range r.Results {
		if res.Baseline || res.Ratio <= 0 {
			continue
		}
		bars = append(bars, res)
		lo = math.Min(lo, math.Floor(math.Log10(res.Ratio)))
		hi = math.Max(hi, math.Ceil(math.Log10(res.Ratio)))
	}
	const (
		plotW  = 420
		rowH   = 22
		top    = 48
		bottom = 30
	)
	// Labels are right-aligned against the plot: wide enough for the
	// longest (about 6.6 px a character at 12 px sans-serif).
	labelW := 200
	for _, res := range bars {
		labelW = max(labelW, 16+int(6.6*float64(len(barLabel(res)))))
	}
	x := func(ratio float64) float64 {
		return float64(labelW) + (math.Log10(ratio)-lo)/(hi-lo)*plotW
	}
	height := top + len(bars)*rowH + bottom
	width := labelW + plotW + 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="10" y="38" fill="#555">speed relative to the baseline of each metric (log scale; right of 1x is faster)</text>`+"\n")
	bottomY := top + len(bars)*rowH
	for e := lo; e <= hi; e++ {
		gx := x(math.Pow(10, e))
		dash := ` stroke="#ccc"`
		if e == 0 {
			dash = ` stroke="black" stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"%s/>`+"\n", gx, top-4, gx, bottomY+4, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%gx</text>`+"\n", gx, bottomY+18, math.Pow(10, e))
	}
	one := x(1)
	for i, res := range bars {
		y := top + i*rowH
		end := x(res.Ratio)
		// Slower bars grow left, but their value goes right of the 1x line
		// like the faster ones' so it never runs into the labels.
		color, left, textX := "#4c78a8", one, end+4
		if res.Ratio < 1 {
			color, left, textX = "#e45756", end, one+4
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-6, y+15, html.EscapeString(barLabel(res)))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y+3, math.Max(math.Abs(end-one), 1), rowH-6, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.2fx</text>`+"\n", textX, y+15, res.Ratio)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func barLabel(res Result) string {
	return fmt.Sprintf("%s: %s, %s", res.Section, res.Metric, res.Variant)
}
