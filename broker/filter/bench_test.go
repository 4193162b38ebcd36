package filter

import "testing"

func BenchmarkMatchTags(b *testing.B) {
	f, _ := Compile(TypeTag, "TagA || TagB || TagC")
	for i := 0; i < b.N; i++ {
		f.Match("TagC", nil)
	}
}

func BenchmarkMatchSQL(b *testing.B) {
	f, _ := Compile(TypeSQL, "amount > 100 AND region IN ('eu', 'us') AND TAGS <> 'test'")
	props := map[string]string{"amount": "250", "region": "us"}
	for i := 0; i < b.N; i++ {
		f.Match("TagA", props)
	}
}

func BenchmarkCompileSQL(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Compile(TypeSQL, "amount > 100 AND region IN ('eu', 'us') AND TAGS <> 'test'")
	}
}
