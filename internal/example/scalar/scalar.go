// Package scalar holds the example's GraphQL scalars as gqlgen binds them
// (gqlgen.yml): Int, GraphQL's 32-bit integer, and IntID, an ID that is a
// number. gqlgen's own take any 64-bit integer for an Int, and answer an
// ID that is not a number with strconv's text; these refuse what they
// cannot read with a message written for the client (the presenter codes
// an argument's error BAD_USER_INPUT).
package scalar

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
)

// errInt is the answer to an Int out of range or not a whole number.
var errInt = errors.New("an Int is a whole number from -2147483648 to 2147483647 (GraphQL's Int is 32-bit)")

// MarshalInt writes an Int.
func MarshalInt(i int) graphql.Marshaler { return graphql.MarshalInt(i) }

// UnmarshalInt reads an Int: a whole number that fits in 32 bits, from a
// literal of the document (an int64) or a variable (a json.Number). A
// string is not an Int.
func UnmarshalInt(v any) (int, error) {
	var n int64
	switch v := v.(type) {
	case int:
		n = int64(v)
	case int32:
		n = int64(v)
	case int64:
		n = v
	case json.Number:
		i, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, errInt
		}
		n = i
	default:
		return 0, errInt
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, errInt
	}
	return int(n), nil
}

// errID is the answer to an ID that is not one of the example's.
var errID = errors.New("an ID of this API is a positive whole number, such as \"42\"")

// MarshalIntID writes an ID as a string.
func MarshalIntID(i int) graphql.Marshaler { return graphql.MarshalIntID(i) }

// UnmarshalIntID reads an ID: a string (or, as GraphQL allows, a number)
// holding a positive whole number.
func UnmarshalIntID(v any) (int, error) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = string(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	case int:
		s = strconv.Itoa(v)
	default:
		return 0, errID
	}
	id, err := strconv.Atoi(s)
	if err != nil || id < 1 {
		return 0, errID
	}
	return id, nil
}
