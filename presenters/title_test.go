package presenters

import (
	"strings"
	"testing"
)

func TestTitleFrom(t *testing.T) {
	long := strings.Repeat("é", 100)
	got := TitleFrom(TextContent(long + "\nsecond line"))
	if !strings.HasSuffix(got, "…") || len(got) > MaxTitleBytes || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("title %q (%d bytes): want the first line cut at a character boundary within %d bytes", got, len(got), MaxTitleBytes)
	}
	for _, tc := range []struct {
		content MessageContent
		want    string
	}{
		{TextContent("  short \nmore"), "short"},
		{MessageContent{Parts: []ContentPart{{Image: &Image{Data: "x.png"}}, {Text: "after the image"}}}, "after the image"},
		{TextContent(strings.Repeat("a", MaxTitleBytes)), strings.Repeat("a", MaxTitleBytes)},
		{MessageContent{Parts: []ContentPart{{Image: &Image{Data: "x.png"}}, {File: &File{Path: "src/main.go"}}}}, "src/main.go"},
		{MessageContent{Parts: []ContentPart{{Image: &Image{Data: "https://example.com/x.png"}}}}, "Image"},
	} {
		if got := TitleFrom(tc.content); got != tc.want {
			t.Errorf("TitleFrom(%+v) = %q, want %q", tc.content, got, tc.want)
		}
	}
}

func TestRiskRankOrdersLevelsAndDistrustsUnknownOnes(t *testing.T) {
	order := []RiskLevel{RiskLow, RiskMedium, RiskHigh, RiskCritical}
	for i, l := range order {
		if l.Rank() != i {
			t.Errorf("%s ranks %d, want %d", l, l.Rank(), i)
		}
	}
	if RiskLevel("").Rank() != RiskCritical.Rank() || RiskLevel("extreme").Rank() != RiskCritical.Rank() {
		t.Error("an unknown risk level must rank as critical")
	}
}
