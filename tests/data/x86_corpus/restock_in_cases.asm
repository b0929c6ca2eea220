section .data
    item      db "coffee", 0
    stock     dd 0
    target    dd 10
    case_size dd 6
section .text
global main
main:
    push item
    call get_stock
    pop dword [stock]
    cmp dword [stock], 5
    jb reorder
    ret
reorder:
    mov eax, [target]
    sub eax, [stock]               ; units missing
    lea eax, [eax + 5]             ; round up to whole cases
    xor edx, edx
    mov ecx, [case_size]
    div ecx
    push item
    push eax
    call order
    ret
