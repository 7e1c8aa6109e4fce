package pitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/surfaced/surfaced"
	proc "github.com/surfaced/surfaced/agentproc"
	"github.com/surfaced/surfaced/internal/llmstub"
	"github.com/surfaced/surfaced/internal/testkit"
	pb "github.com/surfaced/surfaced/proto/surfaced/v1"
	"github.com/surfaced/surfaced/store/memstore"
)

// BenchmarkPiOverhead measures what surfaced adds to driving pi directly.
// Each iteration sends one prompt to a pi driven over a plain pipe (the
// baseline: JSONL on its stdin, events read from its stdout) and one to a
// pi hosted by surfaced (HTTP POST /prompt, chat chunks read from the SSE
// stream), both against the same scripted model server, alternating so that
// drift hits both alike. It reports the median time to the first text
// delta and to the end of the turn (agent_end / finish) for each, and their
// ratios (gateway / direct).
func BenchmarkPiOverhead(b *testing.B) {
	srv := model(b, func(r llmstub.Request) llmstub.Reply {
		parts := make([]string, 20)
		for i := range parts {
			parts[i] = fmt.Sprintf("word%d ", i)
		}
		return llmstub.Say(parts...)
	})
	home := Home(b, Config{BaseURL: srv.URL})

	direct := startDirect(b, home)
	d := startDaemon(b, surfaced.Limits{}, Agent(b, "pi", home))
	id := d.create("")
	s := d.sse(id)
	ready(b, s)

	// Warm both up (first model call, JIT).
	direct.turn(b, "warm up")
	gatewayTurn(b, d, s, id, "warm up")

	var dFirst, dEnd, gFirst, gEnd []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, e := direct.turn(b, fmt.Sprintf("prompt %d", i))
		dFirst, dEnd = append(dFirst, f), append(dEnd, e)
		f, e = gatewayTurn(b, d, s, id, fmt.Sprintf("prompt %d", i))
		gFirst, gEnd = append(gFirst, f), append(gEnd, e)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	df, de, gf, ge := median(dFirst), median(dEnd), median(gFirst), median(gEnd)
	b.ReportMetric(ms(df), "direct-first-ms")
	b.ReportMetric(ms(gf), "gateway-first-ms")
	b.ReportMetric(ms(de), "direct-end-ms")
	b.ReportMetric(ms(ge), "gateway-end-ms")
	b.ReportMetric(float64(gf)/float64(df), "ratio-first")
	b.ReportMetric(float64(ge)/float64(de), "ratio-end")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// gatewayTurn posts a prompt and reads the SSE stream to the turn's finish.
func gatewayTurn(b *testing.B, d *daemon, s *testkit.SSE, id, text string) (first, end time.Duration) {
	start := time.Now()
	d.prompt(id, text)
	for {
		select {
		case ev := <-s.Events:
			if ev.Kind != "chat" {
				continue
			}
			switch ev.Data["type"] {
			case "text-delta":
				if first == 0 {
					first = time.Since(start)
				}
			case "finish":
				return first, time.Since(start)
			}
		case <-time.After(wait):
			b.Fatalf("gateway turn %q did not finish", text)
		}
	}
}

// directPi is pi on a plain pipe, driven the way pi's own docs show.
type directPi struct {
	in  io.WriteCloser
	out *bufio.Reader
	n   int
}

func startDirect(b *testing.B, home string) *directPi {
	b.Helper()
	argv := Argv(b)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = b.TempDir()
	cmd.Env = append(os.Environ(), Env(home)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	p := &directPi{in: in, out: bufio.NewReaderSize(out, 1<<20)}
	// Ready when it answers get_commands, as surfaced decides.
	p.send(b, `{"id":"ready","type":"get_commands"}`)
	p.until(b, func(typ string, line []byte) bool { return typ == "response" })
	return p
}

func (p *directPi) send(b *testing.B, line string) {
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		b.Fatal(err)
	}
}

// until reads lines until done reports true.
func (p *directPi) until(b *testing.B, done func(typ string, line []byte) bool) {
	for {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			b.Fatalf("pi output ended: %v", err)
		}
		var env struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &env) == nil && done(env.Type, line) {
			return
		}
	}
}

func (p *directPi) turn(b *testing.B, text string) (first, end time.Duration) {
	p.n++
	msg, _ := json.Marshal(text)
	start := time.Now()
	p.send(b, fmt.Sprintf(`{"id":"p%d","type":"prompt","message":%s}`, p.n, msg))
	p.until(b, func(typ string, line []byte) bool {
		switch typ {
		case "message_update":
			if first == 0 && strings.Contains(string(line), `"type":"text_delta"`) {
				first = time.Since(start)
			}
		case "agent_end":
			end = time.Since(start)
			return true
		}
		return false
	})
	return first, end
}

// BenchmarkPiHostedCommand measures a command on a domain that pi hosts
// through @surfaced/agent (lab/inc of the lab extension, in process:
// runtime → domain actor → surface_dispatch over pi's stdin → the extension
// → surface_dispatch_result over pi's stdout → durable commit → result),
// against, in the same run and alternating so that drift hits all alike:
//
//   - the same command on a Go agent-hosted domain (demo/increment of the
//     fake agent, written with agentkit), through the same runtime;
//   - a raw pipe round trip to a pi process with the same extension: one
//     surface_dispatch written to its stdin, its surface_dispatch_result
//     read from its stdout (pi's "Unknown command" refusal of the line
//     skipped), nothing in between.
//
// It reports the p50 of each (µs) and the ratios of the pi-hosted command
// to the two baselines.
func BenchmarkPiHostedCommand(b *testing.B) {
	srv := model(b, func(llmstub.Request) llmstub.Reply { return llmstub.Say("ok") })
	home := Home(b, Config{BaseURL: srv.URL})
	rt, err := surfaced.New(surfaced.Config{Store: memstore.New(), Logger: testLogger(),
		Agents: []surfaced.AgentSpec{labAgent(b, home), {Name: "go", Argv: testkit.FakeAgent(b)}},
		Limits: surfaced.Limits{CommandsPerSecond: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	caller := &pb.Caller{Subject: "bench", Via: "browser"}
	session := func(agent string) string {
		id, err := rt.CreateSession(context.Background(), surfaced.CreateOptions{Owner: "bench", Agent: agent})
		if err != nil {
			b.Fatal(err)
		}
		testkit.Eventually(b, wait, func() bool {
			res, err := rt.Request(context.Background(), id, &pb.GetSummary{Caller: caller})
			return err == nil && res.(*pb.SessionSummary).GetStatus() == "ready" && len(res.(*pb.SessionSummary).GetSurfaces()) > 0
		}, "the %s session to be ready", agent)
		return id
	}
	piID, goID := session("pi"), session("go")
	command := func(id, domain, action string) time.Duration {
		t0 := time.Now()
		res, err := rt.Request(context.Background(), id, &pb.RunCommand{Caller: caller, Domain: domain, Action: action})
		d := time.Since(t0)
		if err != nil || !res.(*pb.CommandResult).GetOk() {
			b.Fatalf("%s/%s: %v %v", domain, action, err, res)
		}
		return d
	}
	raw := startRawPi(b, home)

	// Warm all three up (the JIT, the first store writes).
	for range 50 {
		command(piID, "lab", "inc")
		command(goID, "demo", "increment")
		raw.dispatch(b)
	}
	var pi, goAgent, pipe []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pi = append(pi, command(piID, "lab", "inc"))
		goAgent = append(goAgent, command(goID, "demo", "increment"))
		pipe = append(pipe, raw.dispatch(b))
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	p, g, r := median(pi), median(goAgent), median(pipe)
	b.ReportMetric(us(p), "pi-p50-µs")
	b.ReportMetric(us(g), "go-p50-µs")
	b.ReportMetric(us(r), "raw-pi-pipe-p50-µs")
	b.ReportMetric(float64(p)/float64(g), "pi/go")
	b.ReportMetric(float64(p)/float64(r), "pi/raw")
}

// rawPi is pi with the lab extension on a plain pipe, spoken to as the
// daemon would: agent_ready, then surface_dispatch lines.
type rawPi struct {
	in    io.WriteCloser
	out   *bufio.Reader
	n     int
	state json.RawMessage
}

func startRawPi(b *testing.B, home string) *rawPi {
	b.Helper()
	argv := Argv(b, "-e", LabExtension())
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = b.TempDir()
	cmd.Env = append(append(os.Environ(), Env(home)...), "SURFACED_SESSION_ID=bench-raw")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	p := &rawPi{in: in, out: bufio.NewReaderSize(out, 1<<20), state: json.RawMessage(`{"n":0}`)}
	p.until(b, proc.TypeAgentReady)
	return p
}

// until reads lines until one of type typ, and returns it.
func (p *rawPi) until(b *testing.B, typ string) []byte {
	for {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			b.Fatalf("pi output ended: %v", err)
		}
		env, err := proc.DecodeEnvelope(bytes.TrimRight(line, "\r\n"))
		if err == nil && env.Type == typ {
			return line
		}
	}
}

// dispatch is one surface_dispatch round trip.
func (p *rawPi) dispatch(b *testing.B) time.Duration {
	p.n++
	line, err := proc.Marshal(proc.SurfaceDispatch{Type: proc.TypeSurfaceDispatch, ID: fmt.Sprint(p.n), Domain: "lab",
		Action: "inc", Args: json.RawMessage(`{}`), State: p.state, Rev: uint64(p.n)})
	if err != nil {
		b.Fatal(err)
	}
	line = append(line, '\n')
	t0 := time.Now()
	if _, err := p.in.Write(line); err != nil {
		b.Fatal(err)
	}
	ans := p.until(b, proc.TypeSurfaceDispatchResult)
	d := time.Since(t0)
	var res proc.SurfaceDispatchResult
	if err := json.Unmarshal(ans, &res); err != nil || len(res.State) == 0 {
		b.Fatalf("answer %s: %v", ans, err)
	}
	p.state = res.State
	return d
}
