package bench

import (
	"fmt"
	"html"
	"io"
	"math"
)

// Chart geometry, in SVG user units.
const (
	chartWidth   = 960
	chartHeight  = 380
	panelTop     = 70
	panelBottom  = 320
	panelGap     = 30
	chartMargin  = 50
	legendSwatch = 12
)

// palette colours the configurations in order (colour-blind safe, Okabe-Ito).
var palette = []string{"#E69F00", "#0072B2", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

// WriteSVG draws the closed-loop 2xx throughput as one panel per route (each
// with its own scale: `/` is hundreds of times faster than `/fib`), one bar
// per configuration, labelled with its value and its ratio to the first.
func WriteSVG(w io.Writer, res *Results) error {
	p := &printer{w: w}
	p.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	p.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p.printf(`<text x="%d" y="24" font-size="16" font-weight="bold">2xx responses per second, closed loop (keep-alive, -c %d), %d CPUs</text>`+"\n",
		chartMargin, res.Plan.Concurrency, res.Machine.CPUs)
	writeLegend(p, res)
	routes := res.Plan.Routes
	panelWidth := (chartWidth - 2*chartMargin - panelGap*(len(routes)-1)) / max(len(routes), 1)
	for i, route := range routes {
		writePanel(p, res, route, chartMargin+i*(panelWidth+panelGap), panelWidth)
	}
	p.printf(`<text x="%d" y="%d" fill="#555">ratio under each bar: against "%s" on the same route, same run</text>`+"\n",
		chartMargin, chartHeight-10, html.EscapeString(res.Plan.Configs[0].Name))
	p.printf("</svg>\n")
	return p.err
}

func writeLegend(p *printer, res *Results) {
	x := chartMargin
	for i, cr := range res.Configs {
		name := html.EscapeString(cr.Config.Name)
		p.printf(`<rect x="%d" y="38" width="%d" height="%d" fill="%s"/><text x="%d" y="49">%s</text>`+"\n",
			x, legendSwatch, legendSwatch, palette[i%len(palette)], x+legendSwatch+4, name)
		x += legendSwatch + 12 + 7*len(cr.Config.Name)
	}
}

func writePanel(p *printer, res *Results, route string, left, width int) {
	values := make([]float64, len(res.Configs))
	top := 0.0
	for i, cr := range res.Configs {
		values[i] = res.goodputOf(cr.Config.Name, route)
		top = math.Max(top, values[i])
	}
	scale := niceCeiling(top)
	height := float64(panelBottom - panelTop)
	p.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`+"\n", left, panelBottom, left+width, panelBottom)
	p.printf(`<text x="%d" y="%d" fill="#555">%s req/s</text>`+"\n", left, panelTop-4, formatRate(scale))
	p.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd" stroke-dasharray="3,3"/>`+"\n", left, panelTop, left+width, panelTop)
	slot := float64(width) / float64(max(len(values), 1))
	bar := slot * 0.7
	for i, v := range values {
		h := 0.0
		if scale > 0 {
			h = height * v / scale
		}
		x := float64(left) + float64(i)*slot + (slot-bar)/2
		y := float64(panelBottom) - h
		p.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.1f req/s</title></rect>`+"\n",
			x, y, bar, h, palette[i%len(palette)], html.EscapeString(res.Configs[i].Config.Name), html.EscapeString(route), v)
		p.printf(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x+bar/2, y-4, formatRate(v))
		p.printf(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x+bar/2, panelBottom+14, Ratio(v, values[0]))
	}
	p.printf(`<text x="%.1f" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n",
		float64(left)+float64(width)/2, panelBottom+32, html.EscapeString(route))
}

// niceCeiling rounds v up to 1, 2 or 5 times a power of ten, so the top of
// a panel's scale is a round number; 0 for v <= 0.
func niceCeiling(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	magnitude := math.Pow(10, math.Floor(math.Log10(v)))
	for _, step := range []float64{1, 2, 5, 10} {
		if v <= step*magnitude {
			return step * magnitude
		}
	}
	return 10 * magnitude
}

// formatRate prints a rate compactly: 45k, 1267, 7.8.
func formatRate(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}
