package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkNumbers is a middleware that checks every integer argument of a
// tools/call before the SDK decodes it, so that a number that is not a
// whole number in range gets a refusal naming the argument in words
// ("seq: 1e+20 is larger than any sequence can be") instead of a JSON
// decoder's or a schema validator's message. It also rewords the SDK's
// other argument errors to name the argument first.
func checkNumbers(schemas map[string]*jsonschema.Schema) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
				if msg := badNumber(schemas[p.Name], p.Arguments); msg != "" {
					return toolError(msg), nil
				}
			}
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r.IsError {
				for _, c := range r.Content {
					if tc, ok := c.(*mcp.TextContent); ok {
						tc.Text = rewordValidation(tc.Text)
					}
				}
			}
			return res, err
		}
	}
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// badNumber says what is wrong with the first integer argument of args
// that the schema s does not allow, or "".
func badNumber(s *jsonschema.Schema, args json.RawMessage) string {
	if s == nil || len(args) == 0 {
		return ""
	}
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return ""
	}
	for name, ps := range s.Properties {
		v, ok := m[name]
		if !ok || v == nil || ps.Type != "integer" {
			continue
		}
		num, ok := v.(json.Number)
		if !ok {
			return fmt.Sprintf("%s: want a whole number, got %s", name, jsonText(v))
		}
		f, _, err := big.ParseFloat(string(num), 10, 256, big.ToNearestEven)
		if err != nil || !f.IsInt() {
			return fmt.Sprintf("%s: %s is not a whole number", name, num)
		}
		n, _ := f.Int(nil)
		if ps.Minimum != nil && n.Cmp(big.NewInt(int64(*ps.Minimum))) < 0 {
			if *ps.Minimum == 0 {
				return fmt.Sprintf("%s: %s is negative: sequences count up from 0", name, num)
			}
			return fmt.Sprintf("%s: %s is less than %d", name, num, int64(*ps.Minimum))
		}
		if ps.Maximum != nil && n.Cmp(big.NewInt(int64(*ps.Maximum))) > 0 {
			if *ps.Maximum == mcpMaxSeq {
				return fmt.Sprintf("%s: %s is larger than any sequence can be (zerofs_log shows the sequences there are)", name, num)
			}
			return fmt.Sprintf("%s: %s is more than the most allowed, %d", name, num, int64(*ps.Maximum))
		}
	}
	return ""
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// validationPrefix is how the SDK words a schema violation.
var validationPrefix = regexp.MustCompile(`^validating "arguments": validating root: validating /properties/([A-Za-z_]+): `)

// rewordValidation puts the argument's name first in the SDK's schema
// errors: "n: type: "x" has type string, want integer".
func rewordValidation(s string) string {
	if m := validationPrefix.FindStringSubmatch(s); m != nil {
		return m[1] + ": " + s[len(m[0]):]
	}
	return strings.TrimPrefix(s, `validating "arguments": validating root: `)
}
