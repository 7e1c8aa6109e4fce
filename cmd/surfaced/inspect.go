package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/surfaced/surfaced"
	"github.com/surfaced/surfaced/actors/inspect"
	"github.com/surfaced/surfaced/config"
	"github.com/surfaced/surfaced/gateway/debug"
	"github.com/surfaced/surfaced/gateway/guard"
)

// ---------------------------------------------------------------------------
// The daemon side: --dev.

// devMode is the mailbox inspector of a daemon started with --dev. A nil
// *devMode is development mode off: its methods return nil props functions
// (actors are spawned with their plain props: no wrapping, no cost) and
// mount nothing (/debug/* answers 404).
type devMode struct {
	insp     *inspect.Inspector
	handler  *debug.Handler
	stopDead func()
	log      *slog.Logger
	closed   sync.Once
}

func newDevMode(f *config.File, log *slog.Logger) *devMode {
	if !f.Dev {
		return nil
	}
	return &devMode{insp: inspect.New(inspect.Options{}), log: log}
}

// runtimeProps is surfaced.Config.Props.
func (d *devMode) runtimeProps() func(kind, sessionID, domain string) []actor.PropsOption {
	if d == nil {
		return nil
	}
	return d.insp.Props
}

// gatewayProps is gateway.Options.Props.
func (d *devMode) gatewayProps() func(kind, sessionID string) []actor.PropsOption {
	if d == nil {
		return nil
	}
	return d.insp.GatewayProps
}

// attach registers the inspector's metrics and dead-letter watch on the
// runtime and builds the /debug handler.
func (d *devMode) attach(rt *surfaced.Runtime, g *guard.Guard) error {
	if d == nil {
		return nil
	}
	if err := d.insp.Register(rt.Registry()); err != nil {
		return err
	}
	d.stopDead = d.insp.WatchDeadLetters(rt.System())
	d.handler = debug.New(debug.Options{Inspector: d.insp, Node: rt.NodeID(), Guard: g, Logger: d.log})
	d.log.Warn("development mode: the mailbox inspector is on at " + debug.Prefix + "/ (every actor of this node, for every signed-in user)")
	return nil
}

// mount adds /debug to the gateway's mounts.
func (d *devMode) mount(mounts map[string]http.Handler) map[string]http.Handler {
	if d == nil || d.handler == nil {
		return mounts
	}
	if mounts == nil {
		mounts = map[string]http.Handler{}
	}
	mounts[debug.Prefix] = d.handler
	return mounts
}

// close ends the inspector's streams (so that the HTTP server's shutdown
// does not wait for them) and its dead-letter watch.
func (d *devMode) close() {
	if d == nil {
		return
	}
	// Called from the HTTP server's shutdown and from runDaemon's defer.
	d.closed.Do(func() {
		if d.handler != nil {
			d.handler.Close()
		}
		if d.stopDead != nil {
			d.stopDead()
		}
	})
}

// ---------------------------------------------------------------------------
// The client: surfaced inspect.

type inspectFlags struct {
	url      string
	token    string
	watch    bool
	interval time.Duration
	sort     string
	session  string
	kind     string
	json     bool
}

func inspectCmd() *cobra.Command {
	var f inspectFlags
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Show every actor's mailbox of a daemon started with --dev (a top-like view)",
		Long: `Show the actors of a running daemon and their mailboxes: queue depth, messages
posted and processed, handler time (p50/p99 over the recent window), the
message being handled now and for how long. The daemon must run with --dev;
the data comes from its GET /debug/actors, behind the same authentication as
the API (--token, or $SURFACED_TOKEN).

With --watch the view refreshes every --interval until interrupted.`,
		Example: `  surfaced inspect --watch --sort depth
  surfaced inspect --url http://127.0.0.1:9000 --session 01jabc... --sort latency
  SURFACED_TOKEN=... surfaced inspect --kind surface --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("token") {
				f.token = os.Getenv("SURFACED_TOKEN")
			}
			return runInspect(cmd.Context(), &f, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.url, "url", "http://"+config.DefaultAddr, "the daemon's base URL")
	fs.StringVar(&f.token, "token", "", "the bearer token (default $SURFACED_TOKEN)")
	fs.BoolVarP(&f.watch, "watch", "w", false, "refresh until interrupted")
	fs.DurationVar(&f.interval, "interval", time.Second, "refresh period with --watch")
	fs.StringVar(&f.sort, "sort", "", "order: depth (deepest mailbox first) or latency (slowest first); default by session")
	fs.StringVar(&f.session, "session", "", "only the actors of this session")
	fs.StringVar(&f.kind, "kind", "", "only this kind: "+strings.Join(inspect.Kinds, ", "))
	fs.BoolVar(&f.json, "json", false, "print the JSON answer instead of the table (once, or one line per refresh)")
	return cmd
}

// inspectClient fetches /debug/actors.
type inspectClient struct {
	endpoint string // .../debug/actors?...
	base     string
	token    string
	hc       *http.Client
}

// fetchError is a failure with a message for people; permanent ones (not
// dev mode, refused credentials) end --watch too.
type fetchError struct {
	msg       string
	permanent bool
}

func (e *fetchError) Error() string { return e.msg }

func runInspect(ctx context.Context, f *inspectFlags, out io.Writer) error {
	q := inspect.Query{Kind: f.kind, Session: f.session, Sort: f.sort}
	if err := q.Validate(); err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--%w", err)}
	}
	if f.interval < 100*time.Millisecond {
		return &exitError{code: 2, err: fmt.Errorf("--interval must be at least 100ms, not %s", f.interval)}
	}
	c, err := newInspectClient(f.url, f.token, q)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	raw, rep, err := c.fetch(ctx)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	if !f.watch {
		if f.json {
			_, err = out.Write(raw)
		} else {
			_, err = io.WriteString(out, renderTable(rep, f, time.Now(), 0, ""))
		}
		return err
	}
	tty, rows := terminal(out)
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	var problem string
	for {
		switch {
		case f.json:
			if _, err := out.Write(raw); err != nil {
				return err
			}
		case tty:
			// Home and clear, then the frame: a top-like view.
			_, _ = io.WriteString(out, "\x1b[H\x1b[2J"+renderTable(rep, f, time.Now(), rows, problem))
		default:
			_, _ = io.WriteString(out, renderTable(rep, f, time.Now(), 0, problem)+"\n")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		r, p, err := c.fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fe *fetchError
		if errors.As(err, &fe) && fe.permanent {
			return &exitError{code: 1, err: err}
		}
		if err != nil {
			// The daemon may be restarting: keep the last data, say so, retry.
			problem = err.Error()
			if f.json {
				fmt.Fprintln(os.Stderr, "surfaced inspect:", problem)
			}
			continue
		}
		raw, rep, problem = r, p, ""
	}
}

func newInspectClient(base, token string, q inspect.Query) (*inspectClient, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url must be the daemon's http(s)://host:port, not %q", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + debug.Prefix + "/actors"
	v := url.Values{}
	if q.Kind != "" {
		v.Set("kind", q.Kind)
	}
	if q.Session != "" {
		v.Set("session", q.Session)
	}
	if q.Sort != "" {
		v.Set("sort", q.Sort)
	}
	u.RawQuery = v.Encode()
	return &inspectClient{endpoint: u.String(), base: strings.TrimSuffix(base, "/"), token: token,
		hc: &http.Client{Timeout: 5 * time.Second}}, nil
}

func (c *inspectClient) fetch(ctx context.Context) ([]byte, *inspect.Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("request: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, nil, &fetchError{msg: fmt.Sprintf("the daemon at %s did not answer within 5s", c.base)}
		}
		return nil, nil, &fetchError{msg: fmt.Sprintf("cannot reach the daemon at %s (is it running? use --url): %v", c.base, rootCause(err))}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, &fetchError{msg: fmt.Sprintf("reading the answer of %s: %v", c.base, err)}
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, nil, &fetchError{permanent: true, msg: fmt.Sprintf("the daemon at %s is not in development mode (GET %s/actors answered 404): restart it with --dev to inspect its actors", c.base, debug.Prefix)}
	case http.StatusUnauthorized:
		return nil, nil, &fetchError{permanent: true, msg: fmt.Sprintf("the daemon at %s refused the credentials (401 %s): pass --token or set SURFACED_TOKEN", c.base, apiMessage(body))}
	default:
		return nil, nil, &fetchError{permanent: resp.StatusCode < 500, msg: fmt.Sprintf("the daemon at %s answered %d: %s", c.base, resp.StatusCode, apiMessage(body))}
	}
	var rep inspect.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, nil, &fetchError{permanent: true, msg: fmt.Sprintf("the daemon at %s answered something that is not the inspector's JSON: %v", c.base, err)}
	}
	return body, &rep, nil
}

// rootCause drops the url.Error wrapping ("Get \"...\": dial tcp ...").
func rootCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// apiMessage extracts "code: message" from an API error body.
func apiMessage(body []byte) string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return e.Error.Code + ": " + e.Error.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// terminal reports whether out is a terminal, and its height in rows.
func terminal(out io.Writer) (bool, int) {
	f, ok := out.(*os.File)
	if !ok {
		return false, 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return false, 0
	}
	return true, int(ws.Row)
}

// renderTable draws one frame: a header line, then one line per actor.
// maxRows > 0 limits the frame to that many terminal rows.
func renderTable(rep *inspect.Report, f *inspectFlags, now time.Time, maxRows int, problem string) string {
	var b bytes.Buffer
	order := f.sort
	if order == "" {
		order = "session"
	}
	queued := 0
	for _, a := range rep.Actors {
		queued += a.Depth
	}
	fmt.Fprintf(&b, "surfaced inspect  node %s  %d actors  %d queued  sort %s  %s\n",
		rep.Node, len(rep.Actors), queued, order, now.Format("15:04:05"))
	if problem != "" {
		fmt.Fprintf(&b, "! %s (showing the last answer)\n", problem)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tSESSION\tDOMAIN\tDEPTH\tPOSTED\tPROCESSED\tP50\tP99\tCURRENT\tFOR\tUP\tID")
	shown := rep.Actors
	if maxRows > 0 {
		room := maxRows - 3
		if problem != "" {
			room--
		}
		if room < 1 {
			room = 1
		}
		if len(shown) > room {
			shown = shown[:room-1]
		}
	}
	for _, a := range shown {
		cur, curFor := "-", ""
		if a.Current != "" {
			cur = a.Current
			if a.CurrentForMS != nil {
				curFor = "<1ms"
				if *a.CurrentForMS > 0 {
					curFor = fmtMicros(*a.CurrentForMS * 1000)
				}
			}
		}
		dom := a.Domain
		if dom == "" {
			dom = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.Kind, short(a.Session, 26), short(dom, 20), a.Depth, a.Posted, a.Processed,
			fmtP50(a), fmtMicros(a.P99US), short(cur, 32), curFor, fmtUp(now.Sub(a.Started)), a.ID)
	}
	_ = tw.Flush()
	if n := len(rep.Actors) - len(shown); n > 0 {
		fmt.Fprintf(&b, "… %d more (narrow with --session or --kind)\n", n)
	}
	if len(rep.Actors) == 0 {
		b.WriteString("(no actor matches)\n")
	}
	return b.String()
}

func short(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// fmtP50 tells a sub-microsecond median from an empty window.
func fmtP50(a inspect.Actor) string {
	if a.P50US == 0 && a.P99US > 0 {
		return "<1µs"
	}
	return fmtMicros(a.P50US)
}

func fmtMicros(us int64) string {
	switch {
	case us <= 0:
		return "-"
	case us < 1000:
		return fmt.Sprintf("%dµs", us)
	case us < 10_000:
		return fmt.Sprintf("%.2fms", float64(us)/1000)
	case us < 1_000_000:
		return fmt.Sprintf("%.1fms", float64(us)/1000)
	default:
		return fmt.Sprintf("%.2fs", float64(us)/1e6)
	}
}

func fmtUp(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%dh%02dm", s/3600, (s/60)%60)
	}
}
