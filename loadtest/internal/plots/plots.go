// Package plots draws a run's charts as PNG files with gonum.org/v1/plot:
// TTFT and inter-token latency histograms and throughput over time.
//
// Charts are derived from the records alone, so they can be redrawn from
// any set of records; a chart with no data still gets a file (titled
// "no data") so the output folder always has the same shape.
package plots

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"switchyard.dev/loadtest/internal/metrics"
)

// File names of the charts.
const (
	TTFTFile       = "ttft_hist.png"
	ITLFile        = "itl_hist.png"
	ThroughputFile = "throughput.png"
)

const (
	width  = 8 * vg.Inch
	height = 4.5 * vg.Inch
	bins   = 50
)

// WriteAll draws every chart into dir.
func WriteAll(dir string, recs []metrics.Record) error {
	var ttft, itl []float64
	for i := range recs {
		r := &recs[i]
		if !r.OK() {
			continue
		}
		ttft = append(ttft, ms(r.TTFT))
		for _, d := range r.ITLs {
			itl = append(itl, ms(d))
		}
	}
	if err := histogram(filepath.Join(dir, TTFTFile), "Time to first token", "TTFT (ms)", ttft); err != nil {
		return err
	}
	if err := histogram(filepath.Join(dir, ITLFile), "Inter-token latency", "ITL (ms)", itl); err != nil {
		return err
	}
	return throughput(filepath.Join(dir, ThroughputFile), recs)
}

func histogram(path, title, xlabel string, values []float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "requests"
	if len(values) > 0 {
		h, err := plotter.NewHist(plotter.Values(values), bins)
		if err != nil {
			return fmt.Errorf("plot %s: %w", filepath.Base(path), err)
		}
		h.FillColor = color.RGBA{R: 70, G: 130, B: 180, A: 255}
		p.Add(h)
	} else {
		p.Title.Text += " (no data)"
	}
	if err := p.Save(width, height, path); err != nil {
		return fmt.Errorf("plot %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Series bins output tokens and completed requests per second of run time.
// Tokens are placed at the arrival of their chunk (a chunk carrying several
// tokens spreads them evenly), requests at their end.
func Series(recs []metrics.Record) (bin time.Duration, tokens, requests []float64) {
	var end time.Duration
	for i := range recs {
		end = max(end, recs[i].End())
	}
	// Aim for about 100 points whatever the run's length.
	bin = max(100*time.Millisecond, (end / 100).Round(100*time.Millisecond))
	n := int(end/bin) + 1
	tokens, requests = make([]float64, n), make([]float64, n)
	for i := range recs {
		r := &recs[i]
		if r.Chunks > 0 {
			per := float64(max(r.OutputTokens, r.Chunks)) / float64(r.Chunks)
			at := r.Start + r.TTFT
			tokens[min(n-1, int(at/bin))] += per
			for _, d := range r.ITLs {
				at += d
				tokens[min(n-1, int(at/bin))] += per
			}
		}
		if r.OK() {
			requests[min(n-1, int(r.End()/bin))]++
		}
	}
	scale := float64(time.Second) / float64(bin)
	for i := range tokens {
		tokens[i] *= scale
		requests[i] *= scale
	}
	return bin, tokens, requests
}

func throughput(path string, recs []metrics.Record) error {
	bin, tokens, requests := Series(recs)
	top := plot.New()
	top.Title.Text = "Output token throughput"
	top.Y.Label.Text = "tokens/s"
	bottom := plot.New()
	bottom.Title.Text = "Completed requests"
	bottom.Y.Label.Text = "requests/s"
	bottom.X.Label.Text = fmt.Sprintf("time since start (s, %v bins)", bin)
	for _, s := range []struct {
		p   *plot.Plot
		ys  []float64
		col color.RGBA
	}{
		{top, tokens, color.RGBA{R: 46, G: 139, B: 87, A: 255}},
		{bottom, requests, color.RGBA{R: 205, G: 92, B: 92, A: 255}},
	} {
		pts := make(plotter.XYs, len(s.ys))
		for i, y := range s.ys {
			pts[i].X = (time.Duration(i) * bin).Seconds()
			pts[i].Y = y
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", filepath.Base(path), err)
		}
		l.Color = s.col
		s.p.Add(l, plotter.NewGrid())
		s.p.Y.Min = 0
		s.p.Y.Max = math.Max(1, s.p.Y.Max)
	}
	img := vgimg.New(width, 2*height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot %s: %w", filepath.Base(path), err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", filepath.Base(path), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot %s: %w", filepath.Base(path), err)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
