package agui

import (
	"github.com/surfaced/surfaced/internal/delivery"
)

// Transport writes a run's stream: the frames its RunSink queued, rendered
// by the run's Renderer, as @ag-ui/encoder frames events ("data: <JSON>"
// and a blank line; no event or id fields). Keep-alives are SSE comments,
// which an AG-UI client's parser skips.
type Transport struct {
	*delivery.SSE
	R *Renderer
}

// Write implements delivery.Transport.
func (t Transport) Write(it delivery.Item) error {
	if f := it.Frame; f != nil {
		b := t.Buffer()
		d := t.Data()
		*d = t.R.Frame((*d)[:0], f)
		b.Write(*d)
	}
	return t.Spill()
}

// KeepAlive implements delivery.Transport.
func (t Transport) KeepAlive() error { return t.Comment("keep-alive") }

// End implements delivery.Transport: the run's last event, when the stream
// did not end with one (see Renderer.End).
func (t Transport) End(reason delivery.Reason) error {
	d := t.Data()
	*d = t.R.End((*d)[:0], reason)
	if len(*d) == 0 {
		return nil
	}
	t.Buffer().Write(*d)
	return t.Flush()
}
