package gateway

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"

	"github.com/surfaced/surfaced/internal/tracing"
)

// Attributes of an HTTP request's span (OpenTelemetry's HTTP semantic
// conventions), besides the session, domain and action its route names.
const (
	attrMethod = attribute.Key("http.request.method")
	attrRoute  = attribute.Key("http.route")
	attrStatus = attribute.Key("http.response.status_code")
)

// traceRequests makes each HTTP request a span, named by its method and
// route (never the path, which holds ids): every route of the API, the
// SSE and WebSocket setups (the span ends when the stream is handed over
// or ends), the turn's chat streams and every mount (/acp, /mcp, /ag-ui).
// A request with a W3C traceparent header continues its caller's trace;
// the span goes in the request's context, which every request to a session
// carries into its actors. Installed only while tracing is on.
func (s *Server) traceRequests(next echo.HandlerFunc) echo.HandlerFunc {
	node := s.rt.NodeID()
	return func(c echo.Context) error {
		req := c.Request()
		route := c.Path()
		kv := []attribute.KeyValue{tracing.AttrNode.String(node), attrMethod.String(req.Method), attrRoute.String(route)}
		for _, p := range [...]struct {
			name string
			key  attribute.Key
		}{{"id", tracing.AttrSession}, {"domain", tracing.AttrDomain}, {"action", tracing.AttrAction}, {"agent", tracing.AttrAgent}} {
			if v := c.Param(p.name); v != "" {
				kv = append(kv, p.key.String(v))
			}
		}
		ctx := tracing.FromHeaders(req.Context(), propagation.HeaderCarrier(req.Header))
		ctx, span := tracing.StartRoot(ctx, req.Method+" "+route, tracing.Server, kv...)
		if !span.Valid() {
			return next(c)
		}
		c.SetRequest(req.WithContext(ctx))
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status = httpStatus(err)
		}
		span.Set(attrStatus.Int(status))
		if status >= 500 {
			span.Fail(http.StatusText(status))
		}
		span.End()
		return err
	}
}

// httpStatus is the status an error will be answered with.
func httpStatus(err error) int {
	var ae *APIError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ae):
		return ae.Status
	case errors.As(err, &he):
		return he.Code
	}
	if mapped := fromRequestErr(err); mapped != nil {
		return mapped.Status
	}
	return http.StatusInternalServerError
}
