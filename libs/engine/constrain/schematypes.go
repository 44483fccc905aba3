package constrain

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"slices"
)

// typed builds the node of one type of schema o.
func (c *compiler) typed(ptr string, o object, t string, depth int) (node, error) {
	switch t {
	case "object":
		return c.object(ptr, o, depth)
	case "array":
		return c.array(ptr, o, depth)
	case "string":
		lo, hi, err := bounds(ptr, o, "minLength", "maxLength")
		return node{kind: kString, min: lo, max: hi}, err
	case "number", "integer":
		return numberNode(ptr, o, t == "integer")
	case "boolean":
		return node{kind: kLiteral, lit: c.g.addLiterals([][]byte{[]byte("true"), []byte("false")})}, nil
	}
	return node{kind: kLiteral, lit: c.g.addLiterals([][]byte{[]byte("null")})}, nil
}

// bounds reads a pair of count keywords (minItems/maxItems, minLength/
// maxLength); an absent maximum is -1.
func bounds(ptr string, o object, minK, maxK string) (lo, hi int32, err error) {
	lo, hi = 0, -1
	for _, k := range []string{minK, maxK} {
		raw, ok := o.get(k)
		if !ok {
			continue
		}
		var v float64
		if json.Unmarshal(raw, &v) != nil || v < 0 || v != math.Trunc(v) {
			return 0, 0, schemaErr(ptr, k, "must be a non-negative integer")
		}
		if v > math.MaxInt32/2 {
			return 0, 0, schemaErr(ptr, k, "over the supported %d", math.MaxInt32/2)
		}
		if k == minK {
			lo = int32(v)
		} else {
			hi = int32(v)
		}
	}
	if hi >= 0 && lo > hi {
		return 0, 0, schemaErr(ptr, minK, "%s %d is over %s %d", minK, lo, maxK, hi)
	}
	return lo, hi, nil
}

func (c *compiler) array(ptr string, o object, depth int) (node, error) {
	lo, hi, err := bounds(ptr, o, "minItems", "maxItems")
	if err != nil {
		return node{}, err
	}
	n := node{kind: kArray, min: lo, max: hi, val: -1}
	if raw, ok := o.get("items"); ok {
		if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
			return node{}, schemaErr(ptr, "items", "the array (tuple) form is not supported")
		}
		if n.val, err = c.compile(join(ptr, "items"), raw, depth+1); err != nil {
			return node{}, err
		}
	} else {
		n.val = c.any()
	}
	return n, nil
}

// object builds an object node. Only the listed properties are generated,
// in the schema's order, whatever additionalProperties says; an object
// with no properties listed is a map whose values are additionalProperties
// (any value when absent or true, none when false).
func (c *compiler) object(ptr string, o object, depth int) (node, error) {
	var required []string
	if raw, ok := o.get("required"); ok {
		if json.Unmarshal(raw, &required) != nil {
			return node{}, schemaErr(ptr, "required", "must be an array of strings")
		}
	}
	addl, hasAddl := o.get("additionalProperties")
	closed := hasAddl && string(bytes.TrimSpace(addl)) == "false"
	n := node{kind: kObject}
	if raw, ok := o.get("properties"); ok {
		props, isObj, err := parseObject(raw)
		if err != nil || !isObj {
			return node{}, schemaErr(ptr, "properties", "must be an object of schemas")
		}
		for _, p := range props {
			val, err := c.compile(join(ptr, "properties", p.key), p.val, depth+1)
			if err != nil {
				return node{}, err
			}
			n.props = append(n.props, prop{name: p.key, key: quote(p.key), val: val, required: slices.Contains(required, p.key)})
		}
	}
	for i, r := range required {
		switch {
		case slices.Contains(required[:i], r):
			return node{}, schemaErr(ptr, "required", "%q listed twice", r)
		case slices.ContainsFunc(n.props, func(p prop) bool { return p.name == r }):
		case closed:
			return node{}, schemaErr(ptr, "required", "%q is required but additionalProperties is false and it is not in properties", r)
		default: // required but unlisted: any value, after the listed ones
			n.props = append(n.props, prop{name: r, key: quote(r), val: c.any(), required: true})
		}
	}
	if len(n.props) > MaxProperties {
		return node{}, schemaErr(ptr, "properties", "%d properties, over MaxProperties (%d)", len(n.props), MaxProperties)
	}
	if len(n.props) > 0 || closed {
		return n, nil
	}
	n = node{kind: kMap, val: c.any()}
	if hasAddl && string(bytes.TrimSpace(addl)) != "true" {
		var err error
		if n.val, err = c.compile(join(ptr, "additionalProperties"), addl, depth+1); err != nil {
			return node{}, err
		}
	}
	return n, nil
}

func parseRat(b []byte) (*big.Rat, bool) {
	return new(big.Rat).SetString(string(bytes.TrimSpace(b)))
}

// numberNode builds a number node. Bounds are exact for integers; for
// numbers they hold at BoundedFracDigits precision (bounds round inward).
func numberNode(ptr string, o object, integer bool) (node, error) {
	n := node{kind: kNumber, integer: integer}
	if integer {
		n.scale = 0
	} else {
		n.scale = BoundedFracDigits
	}
	lim := pow10[intCap(&node{bounded: true, scale: n.scale})+int(n.scale)] - 1
	lo, hi := -lim, lim
	for _, k := range typeKeywords["number"] {
		raw, ok := o.get(k)
		if !ok {
			continue
		}
		r, ok := parseRat(raw)
		if !ok {
			return node{}, schemaErr(ptr, k, "must be a number")
		}
		n.bounded = true
		r.Mul(r, new(big.Rat).SetInt64(pow10[n.scale]))
		var v int64
		switch k {
		case "minimum":
			v = ratCeil(r, lim)
			lo = max(lo, v)
		case "exclusiveMinimum":
			v = ratFloor(r, lim) + 1
			lo = max(lo, v)
		case "maximum":
			v = ratFloor(r, lim)
			hi = min(hi, v)
		case "exclusiveMaximum":
			v = ratCeil(r, lim) - 1
			hi = min(hi, v)
		}
	}
	if lo > hi {
		return node{}, schemaErr(ptr, "minimum", "no %s lies within the bounds (at %d digits after the point)", map[bool]string{true: "integer", false: "number"}[integer], n.scale)
	}
	n.lo, n.hi = lo, hi
	return n, nil
}

// ratCeil and ratFloor round r to an integer, clamped to ±(lim+1) so that
// the out-of-range side of a bound stays out of range.
func ratCeil(r *big.Rat, lim int64) int64 {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return clampInt(q, lim)
}

func ratFloor(r *big.Rat, lim int64) int64 {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return clampInt(q, lim)
}

func clampInt(q *big.Int, lim int64) int64 {
	switch {
	case q.Cmp(big.NewInt(lim+1)) > 0:
		return lim + 1
	case q.Cmp(big.NewInt(-lim-1)) < 0:
		return -lim - 1
	}
	return q.Int64()
}
