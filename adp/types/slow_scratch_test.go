package types

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestScratchAdversarial(t *testing.T) {
	for _, id := range RegisteredPackIDs() {
		for _, d := range mustPack(t, id).Types {
			var v any
			v = d.Schema
			_ = v
		}
	}
	var cases []string
	cases = append(cases, strings.Repeat(`{"not":`, 60)+`{}`+strings.Repeat(`}`, 60))
	cases = append(cases, strings.Repeat(`{"properties":{"a":`, 31)+`{}`+strings.Repeat(`}}`, 31))
	var sb strings.Builder
	sb.WriteString(`{"allOf":[`)
	for i := 0; i < 20; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"properties":{`)
		for j := 0; j < 30; j++ {
			if j > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `"p%d_%d":{"$ref":"#"}`, i, j)
		}
		sb.WriteString(`},"additionalProperties":{"type":"string"}}`)
	}
	sb.WriteString(`]}`)
	cases = append(cases, sb.String())
	sb.Reset()
	sb.WriteString(`{"$defs":{`)
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&sb, `"d%d":{"properties":{"x":{"$ref":"#/$defs/d%d"},"y":{"$ref":"#/$defs/d%d"}}},`, i, (i+1)%200, (i*7+3)%200)
	}
	sb.WriteString(`"z":{}},"$ref":"#/$defs/d0"}`)
	cases = append(cases, sb.String())
	// wide: 1000 properties
	sb.Reset()
	sb.WriteString(`{"properties":{`)
	for i := 0; i < 1000; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"p%d":{}`, i)
	}
	sb.WriteString(`}}`)
	cases = append(cases, sb.String())
	// wide anyOf of refs 
	sb.Reset()
	sb.WriteString(`{"$defs":{"a":{"anyOf":[`)
	for i := 0; i < 250; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"properties":{"q":{"$ref":"#/$defs/a"}}}`)
	}
	sb.WriteString(`]}},"$ref":"#/$defs/a"}`)
	cases = append(cases, sb.String())
	for _, c := range cases {
		st := time.Now()
		_, err := ParseDefinition(schemaDef(c), Limits{MaxSchemaBytes: 1 << 20})
		t.Logf("%d bytes %v %v", len(c), time.Since(st), err)
	}
}
