package gateway

import (
	"github.com/labstack/echo/v4"

	"github.com/surfaced/surfaced/internal/plainjson"
)

// jsonSerializer writes every JSON body of the API without HTML escaping
// (plainjson): a transcript of '<' is as long as the prompt was, not six
// times longer. Bodies are read as echo reads them.
type jsonSerializer struct{ echo.DefaultJSONSerializer }

// Serialize implements echo.JSONSerializer (the API never indents).
func (jsonSerializer) Serialize(c echo.Context, v any, _ string) error {
	b, err := plainjson.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.Response().Write(append(b, '\n'))
	return err
}
