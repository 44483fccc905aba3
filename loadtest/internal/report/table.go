package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a comparison as data: a header and rows of the same width, the
// first column labels, the others values. Cells hold plain text; each
// format escapes what it must when it writes them.
type Table struct {
	Header []string
	Rows   [][]string
}

// WriteMarkdown writes t as a markdown table: labels left-aligned, values
// right-aligned, | in cells escaped.
func (t Table) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString(mdLine(t.Header))
	sep := make([]string, len(t.Header))
	for i := range sep {
		sep[i] = "---:"
	}
	if len(sep) > 0 {
		sep[0] = ":---"
	}
	b.WriteString(mdLine(sep))
	for _, r := range t.Rows {
		b.WriteString(mdLine(r))
	}
	return write(w, b.String())
}

// WriteText writes t as plain columns for a terminal: labels padded on the
// right, values on the left, columns two spaces apart; widths count runes.
func (t Table) WriteText(w io.Writer) error {
	rows := append([][]string{t.Header}, t.Rows...)
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteString("\n")
	}
	return write(w, b.String())
}

func write(w io.Writer, s string) error {
	if _, err := io.WriteString(w, s); err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	return nil
}

func mdLine(cols []string) string {
	esc := make([]string, len(cols))
	for i, c := range cols {
		esc[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	return "| " + strings.Join(esc, " | ") + " |\n"
}
