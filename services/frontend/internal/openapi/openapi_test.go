package openapi

import (
	"encoding/json"
	"reflect"
	"testing"
)

type inner struct {
	A string `json:"a"`
}

type poly struct{}

func (poly) JSONSchema() map[string]any { return map[string]any{"oneOf": []any{"x"}} }

type req struct {
	inner
	B   *int           `json:"b,omitempty"`
	C   []inner        `json:"c"`
	D   poly           `json:"d"`
	E   map[string]int `json:"e,omitempty"`
	Skp string         `json:"-"`
	Rec *req           `json:"rec,omitempty"`
}

type errBody struct {
	Error string `json:"error"`
}

func TestDocument(t *testing.T) {
	t.Parallel()
	doc := Document("t", "v", []Operation{{Method: "POST", Path: "/x", ID: "x", Request: reflect.TypeFor[req](), Response: reflect.TypeFor[inner](), Stream: reflect.TypeFor[inner](), Errors: []int{400}}}, reflect.TypeFor[errBody]())
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Paths      map[string]map[string]json.RawMessage
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage
				Required   []string
			}
		}
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if _, ok := back.Paths["/x"]["post"]; !ok {
		t.Fatalf("no POST /x in %s", b)
	}
	r := back.Components.Schemas["req"]
	for _, p := range []string{"a", "b", "c", "d", "e", "rec"} {
		if _, ok := r.Properties[p]; !ok {
			t.Errorf("req lacks property %q: %s", p, b)
		}
	}
	if _, ok := r.Properties["Skp"]; ok {
		t.Error("json:\"-\" field listed")
	}
	if want := []string{"a", "c", "d"}; !reflect.DeepEqual(r.Required, want) {
		t.Errorf("required %v, want %v", r.Required, want)
	}
	if string(r.Properties["d"]) != `{"oneOf":["x"]}` {
		t.Errorf("d = %s", r.Properties["d"])
	}
}
