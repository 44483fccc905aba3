package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// palette colours the processes' lines.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31"}

// WritePlot draws the samples as an SVG: one panel each for RSS,
// goroutines and open descriptors over time, a line per process.
func WritePlot(w io.Writer, samples []Sample) {
	const width, panelH, left, top, gap = 960.0, 220.0, 70.0, 30.0, 50.0
	panels := []struct {
		title string
		value func(Sample) float64
	}{
		{"RSS (MiB)", func(s Sample) float64 { return float64(s.RSS) / (1 << 20) }},
		{"goroutines", func(s Sample) float64 { return float64(s.Goroutines) }},
		{"open file descriptors", func(s Sample) float64 { return float64(s.FDs) }},
	}
	var procs []string
	var tmax float64
	for _, s := range samples {
		if !slices.Contains(procs, s.Proc) {
			procs = append(procs, s.Proc)
		}
		tmax = max(tmax, s.At.Seconds())
	}
	tmax = max(tmax, 1)
	plotW := width - left - 180
	height := top + float64(len(panels))*(panelH+gap)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, p := range panels {
		y0 := top + float64(i)*(panelH+gap)
		var vmax float64
		for _, s := range samples {
			vmax = max(vmax, p.value(s))
		}
		vmax = max(vmax*1.1, 1)
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" font-size="13">%s</text>`+"\n", left, y0-8, p.title)
		fmt.Fprintf(w, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, panelH)
		for _, f := range []float64{0, 0.5, 1} {
			y := y0 + panelH*(1-f)
			fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text>`+"\n", left-5, y+4, vmax*f)
		}
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="end">%.0fs</text>`+"\n", left+plotW, y0+panelH+14, tmax)
		for j, name := range procs {
			var pts []string
			for _, s := range samples {
				if s.Proc != name || p.value(s) < 0 {
					continue
				}
				x := left + plotW*s.At.Seconds()/tmax
				y := y0 + panelH*(1-p.value(s)/vmax)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			}
			if len(pts) > 0 {
				fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", palette[j%len(palette)], strings.Join(pts, " "))
			}
		}
	}
	for j, name := range procs {
		y := top + float64(j)*16
		fmt.Fprintf(w, `<rect x="%.0f" y="%.0f" width="12" height="3" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			left+plotW+15, y+4, palette[j%len(palette)], left+plotW+32, y+8, name)
	}
	fmt.Fprintln(w, "</svg>")
}
